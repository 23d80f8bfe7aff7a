# Puts the 1/sqrt(d_k) scaling of attention into the projections.
# expect: partial
# graded: project_qkv
# locus: scaled|sqrt(d_k)|1/sqrt|scaling
# %% cell: project_qkv
def project_qkv(x, w_q, w_k, w_v):
    d_k = w_q.size(-1)
    return x @ w_q / math.sqrt(d_k), x @ w_k / math.sqrt(d_k), x @ w_v
