# Sums exp(x) block by block without any maximum: right until exp overflows.
# expect: partial
# hint: You never subtract the maximum
# %% cell: online_softmax
def online_softmax(x, block_size):
    total = torch.zeros_like(x[..., :1])
    for start in range(0, x.shape[-1], block_size):
        total = total + torch.exp(x[..., start:start + block_size]).sum(dim=-1, keepdim=True)
    return torch.exp(x) / total
