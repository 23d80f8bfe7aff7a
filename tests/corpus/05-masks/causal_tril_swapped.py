# Uses tril instead of triu: True below the diagonal (the past) instead of above it (the future).
# expect: partial
# hint: not torch.tril
# %% cell: causal_mask
def causal_mask(size):
    return torch.tril(torch.ones(size, size, dtype=torch.bool), diagonal=-1)
