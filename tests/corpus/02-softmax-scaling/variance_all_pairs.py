# Takes the variance of every query against every key (q @ kᵀ), not of the n pairs.
# expect: partial
# hint: pair row i of q with row i of k
# %% cell: dot_product_variance
def dot_product_variance(q, k):
    return torch.var(q @ k.T)
