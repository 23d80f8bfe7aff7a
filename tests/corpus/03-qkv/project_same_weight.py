# Uses w_q for the three projections.
# expect: partial
# hint: each of q, k, v has its own weight
# %% cell: project_qkv
def project_qkv(x, w_q, w_k, w_v):
    return x @ w_q, x @ w_q, x @ w_q
