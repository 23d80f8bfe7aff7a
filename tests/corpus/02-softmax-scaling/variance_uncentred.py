# Forgets to subtract the mean: the mean of the squares.
# expect: partial
# hint: subtract their mean
# %% cell: dot_product_variance
def dot_product_variance(q, k):
    s = (q * k).sum(-1)
    return (s * s).sum() / len(s)
