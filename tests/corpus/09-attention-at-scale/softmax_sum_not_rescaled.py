# The running sum keeps the terms computed with the old maximum: no exp(m_old - m_new) factor.
# expect: partial
# hint: not rescaled when the maximum changes
# %% cell: online_softmax
def online_softmax(x, block_size):
    m = torch.full_like(x[..., :1], float("-inf"))
    l = torch.zeros_like(x[..., :1])
    for start in range(0, x.shape[-1], block_size):
        block = x[..., start:start + block_size]
        m = torch.maximum(m, block.amax(dim=-1, keepdim=True))
        l = l + torch.exp(block - m).sum(dim=-1, keepdim=True)
    return torch.exp(x - m) / l
