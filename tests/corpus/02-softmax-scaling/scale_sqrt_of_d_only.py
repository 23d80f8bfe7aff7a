# Takes the square root of d_k only.
# expect: partial
# hint: square root of the whole variance
# %% cell: score_scale
def score_scale(d_k, var_q=1.0, var_k=1.0):
    return 1 / (math.sqrt(d_k) * var_q * var_k)
