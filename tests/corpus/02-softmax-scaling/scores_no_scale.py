# Forgets the division by sqrt(d_k).
# expect: partial
# hint: not scaled
# %% cell: scaled_scores
def scaled_scores(q, k):
    return q @ k.transpose(-2, -1)
