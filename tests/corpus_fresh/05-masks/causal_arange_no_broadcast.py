# Compares two aranges of the same shape without [:, None]: a 1-D mask of False.
# expect: partial
# graded: causal_mask
# locus: (size, size)|[:, None]|2-d|unsqueeze|one row per query
# %% cell: causal_mask
def causal_mask(size):
    return torch.arange(size) > torch.arange(size)
