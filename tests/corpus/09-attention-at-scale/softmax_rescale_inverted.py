# The rescale factor inverted, exp(m_new - m); the first block sets m and the sum.
# expect: partial
# hint: rescale factor is inverted
# %% cell: online_softmax
def online_softmax(x, block_size):
    first = x[..., :block_size]
    m = first.amax(dim=-1, keepdim=True)
    l = torch.exp(first - m).sum(dim=-1, keepdim=True)
    for start in range(block_size, x.shape[-1], block_size):
        block = x[..., start:start + block_size]
        m_new = torch.maximum(m, block.amax(dim=-1, keepdim=True))
        l = l * torch.exp(m_new - m) + torch.exp(block - m_new).sum(dim=-1, keepdim=True)
        m = m_new
    return torch.exp(x - m) / l
