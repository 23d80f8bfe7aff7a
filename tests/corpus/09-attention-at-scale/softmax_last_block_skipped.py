# Only whole blocks: the loop stops before the last, partial block.
# expect: partial
# hint: last, partial block is left out
# %% cell: online_softmax
def online_softmax(x, block_size):
    N = x.shape[-1]
    m = torch.full_like(x[..., :1], float("-inf"))
    l = torch.zeros_like(x[..., :1])
    for b in range(N // block_size):
        block = x[..., b * block_size:(b + 1) * block_size]
        m_new = torch.maximum(m, block.amax(dim=-1, keepdim=True))
        l = l * torch.exp(m - m_new) + torch.exp(block - m_new).sum(dim=-1, keepdim=True)
        m = m_new
    return torch.exp(x - m) / l
