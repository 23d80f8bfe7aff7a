# The running maximum replaced by each block's maximum: right until exp overflows.
# expect: partial
# hint: replaced by each block's maximum
# %% cell: online_softmax
def online_softmax(x, block_size):
    m = torch.full_like(x[..., :1], float("-inf"))
    l = torch.zeros_like(x[..., :1])
    for start in range(0, x.shape[-1], block_size):
        block = x[..., start:start + block_size]
        m_new = block.amax(dim=-1, keepdim=True)
        l = l * torch.exp(m - m_new) + torch.exp(block - m_new).sum(dim=-1, keepdim=True)
        m = m_new
    return torch.exp(x - m) / l
