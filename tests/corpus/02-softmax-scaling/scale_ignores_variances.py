# Always returns the Transformer's 1/sqrt(d_k), whatever the variances.
# expect: partial
# hint: ignores var_q and var_k
# %% cell: score_scale
def score_scale(d_k, var_q=1.0, var_k=1.0):
    return 1 / math.sqrt(d_k)
