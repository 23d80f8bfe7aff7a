# Uses floor division 1 // sqrt(...): the factor is 0 for any d_k > 1.
# expect: partial
# graded: score_scale
# locus: floor|integer division|is 0
# %% cell: score_scale
def score_scale(d_k, var_q=1.0, var_k=1.0):
    return 1 // math.sqrt(d_k * var_q * var_k)
