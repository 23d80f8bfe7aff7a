# Returns a Python float (.item()) instead of a 0-dim tensor.
# expect: partial
# graded: dot_product_variance
# locus: 0-dim|item()|python float|a tensor
# %% cell: dot_product_variance
def dot_product_variance(q, k):
    scores = (q * k).sum(dim=-1)
    deviations = scores - scores.mean()
    return ((deviations**2).sum() / (scores.numel() - 1)).item()
