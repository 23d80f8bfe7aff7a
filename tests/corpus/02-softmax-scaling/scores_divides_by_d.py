# Divides by d_k instead of sqrt(d_k).
# expect: partial
# hint: divided by d_k
# %% cell: scaled_scores
def scaled_scores(q, k):
    return q @ k.transpose(-2, -1) / q.size(-1)
