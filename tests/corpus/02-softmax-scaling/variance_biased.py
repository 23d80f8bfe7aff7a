# Divides by n instead of n - 1 (numpy's default).
# expect: partial
# hint: divides by n
# %% cell: dot_product_variance
def dot_product_variance(q, k):
    s = (q * k).sum(-1)
    return ((s - s.mean()) ** 2).mean()
