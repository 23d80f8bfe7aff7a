# Centres the dot products by the mean of all the elementwise products, not by the mean of the dot products.
# expect: partial
# graded: dot_product_variance
# locus: mean of the dot products|centre|center|mean of the products|wrong mean
# %% cell: dot_product_variance
def dot_product_variance(q, k):
    products = q * k
    scores = products.sum(dim=-1)
    deviations = scores - products.mean()
    return (deviations**2).sum() / (scores.numel() - 1)
