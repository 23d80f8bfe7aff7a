# Casts everything to float32 "to be safe": float64 inputs come back as float32.
# expect: partial
# hint: dtype float32, expected float64
# %% cell: project_qkv
def project_qkv(x, w_q, w_k, w_v):
    x = x.float()
    return x @ w_q.float(), x @ w_k.float(), x @ w_v.float()
