# Normalises each block on its own and never combines them.
# expect: partial
# hint: sums to 1 on its own
# %% cell: online_softmax
def online_softmax(x, block_size):
    out = []
    for start in range(0, x.shape[-1], block_size):
        block = x[..., start:start + block_size]
        e = torch.exp(block - block.amax(dim=-1, keepdim=True))
        out.append(e / e.sum(dim=-1, keepdim=True))
    return torch.cat(out, dim=-1)
