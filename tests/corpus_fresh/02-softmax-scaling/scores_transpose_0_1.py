# Transposes dims 0 and 1 of k instead of the last two: right for 2-D inputs only.
# expect: partial
# graded: scaled_scores
# locus: transpose(0, 1)|transpose(-2, -1)|last two dim|last two axes|dims 0 and 1|.mT
# %% cell: scaled_scores
def scaled_scores(q, k):
    d_k = q.size(-1)
    return q @ k.transpose(0, 1) / math.sqrt(d_k)
