# Adds the two variances instead of multiplying them: Var(q·k) = d_k·var_q·var_k.
# expect: partial
# graded: score_scale
# locus: var_q|var_k|variances
# %% cell: score_scale
def score_scale(d_k, var_q=1.0, var_k=1.0):
    return 1 / math.sqrt(d_k * (var_q + var_k))
