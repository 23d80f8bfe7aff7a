# Returns (k, q, v) instead of (q, k, v).
# expect: partial
# hint: return (q, k, v) in this order
# %% cell: project_qkv
def project_qkv(x, w_q, w_k, w_v):
    q = x @ w_q
    k = x @ w_k
    v = x @ w_v
    return k, q, v
