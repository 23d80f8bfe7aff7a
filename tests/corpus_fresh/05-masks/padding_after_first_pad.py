# Treats everything after the first padding token as padding (cumsum), which fails with left padding.
# expect: partial
# graded: padding_mask
# locus: left padding|anywhere|at the end|cumsum|after the first
# %% cell: padding_mask
def padding_mask(tokens, pad_id=0):
    return (tokens == pad_id).cumsum(dim=-1) > 0
