# Projects the keys and values from the queries instead of from x (k = q @ w_k).
# expect: partial
# graded: project_qkv
# locus: from x|x @ w_k|q @ w_k|from q|chained|from the queries
# %% cell: project_qkv
def project_qkv(x, w_q, w_k, w_v):
    q = x @ w_q
    return q, q @ w_k, q @ w_v
