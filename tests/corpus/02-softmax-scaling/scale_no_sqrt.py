# Divides by the variance instead of the standard deviation.
# expect: partial
# hint: multiplies their variance by c²
# %% cell: score_scale
def score_scale(d_k, var_q=1.0, var_k=1.0):
    return 1 / (d_k * var_q * var_k)
