# Takes the variance of the elementwise products, without summing over the features.
# expect: partial
# hint: sum over the d_k features first
# %% cell: dot_product_variance
def dot_product_variance(q, k):
    return (q * k).var()
