# Returns the standard deviation of q·k instead of its inverse.
# expect: partial
# hint: which shrinks them
# %% cell: score_scale
def score_scale(d_k, var_q=1.0, var_k=1.0):
    return math.sqrt(d_k * var_q * var_k)
