# Scales the query in place (q /= sqrt(d_k)): the caller's q changes.
# expect: partial
# graded: scaled_scores
# locus: in place|in-place|inplace
# %% cell: scaled_scores
def scaled_scores(q, k):
    q /= math.sqrt(q.size(-1))
    return q @ k.transpose(-2, -1)
