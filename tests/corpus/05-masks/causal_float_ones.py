# The right positions, but as a float tensor of 0 and 1 (torch.ones defaults to float32).
# expect: partial
# hint: expected bool
# %% cell: causal_mask
def causal_mask(size):
    return torch.triu(torch.ones(size, size), diagonal=1)
