# Sums the products over the samples (dim 0) instead of the features: d_k sums across samples.
# expect: partial
# graded: dot_product_variance
# locus: over the samples|dim 0|dim=0|sum over the features|d_k features|features first
# %% cell: dot_product_variance
def dot_product_variance(q, k):
    scores = (q * k).sum(dim=0)
    deviations = scores - scores.mean()
    return (deviations**2).sum() / (scores.numel() - 1)
