# Returns the standard deviation.
# expect: partial
# hint: standard deviation
# %% cell: dot_product_variance
def dot_product_variance(q, k):
    return (q * k).sum(-1).std()
