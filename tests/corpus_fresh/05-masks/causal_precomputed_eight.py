# Slices a precomputed 8 x 8 mask: any size above 8 is cut short.
# expect: partial
# graded: causal_mask
# locus: precomputed|above 8|larger than 8|size 16|size 33|fixed size|8 x 8|8 × 8
# %% cell: causal_mask
_MASK = torch.ones(8, 8, dtype=torch.bool).triu(1)


def causal_mask(size):
    return _MASK[:size, :size]
