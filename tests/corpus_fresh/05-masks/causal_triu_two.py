# triu(diagonal=2): query i also sees key i + 1.
# expect: partial
# graded: causal_mask
# locus: diagonal=1|j > i|i + 1|next key|key i + 1
# %% cell: causal_mask
def causal_mask(size):
    return torch.ones(size, size, dtype=torch.bool).triu(diagonal=2)
