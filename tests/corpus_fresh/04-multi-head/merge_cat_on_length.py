# Concatenates the heads along the sequence (dim 1) instead of the features.
# expect: partial
# graded: merge_heads
# locus: along the sequence|dim=1|dim 1|along the length|(B, L, H·D)|features of one position
# %% cell: merge_heads
def merge_heads(x):
    return torch.cat([x[:, h] for h in range(x.size(1))], dim=1)
