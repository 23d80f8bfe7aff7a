# Multiplies q and k elementwise and sums: query i only meets key i, one score per row instead of (L, S).
# expect: partial
# graded: scaled_scores
# locus: every query with every key|each query with each key|elementwise|q * k|row i of q|one score per
# %% cell: scaled_scores
def scaled_scores(q, k):
    d_k = q.size(-1)
    return (q * k).sum(dim=-1, keepdim=True) / math.sqrt(d_k)
