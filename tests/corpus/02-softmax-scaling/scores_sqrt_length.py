# Takes d_k from the wrong dimension: q.size(-2) is the number of queries L.
# expect: partial
# hint: the number of queries
# %% cell: scaled_scores
def scaled_scores(q, k):
    d_k = q.size(-2)
    return q @ k.transpose(-2, -1) / math.sqrt(d_k)
