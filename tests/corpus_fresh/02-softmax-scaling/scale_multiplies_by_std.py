# Divides by sqrt(d_k) but multiplies by the standard deviations of q and k instead of dividing.
# expect: partial
# graded: score_scale
# locus: var_q|var_k|variances
# %% cell: score_scale
def score_scale(d_k, var_q=1.0, var_k=1.0):
    return math.sqrt(var_q * var_k) / math.sqrt(d_k)
