# Computes k qᵀ: one row per key instead of one per query.
# expect: partial
# hint: one row per query
# %% cell: scaled_scores
def scaled_scores(q, k):
    return k @ q.transpose(-2, -1) / math.sqrt(q.size(-1))
