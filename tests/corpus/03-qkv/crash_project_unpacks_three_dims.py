# Flattens x with view after unpacking B, L, d_model = x.shape: crashes on (B1, B2, L, d_model) inputs.
# expect: partial
# hint: You unpack a shape into 3 names
# %% cell: project_qkv
def project_qkv(x, w_q, w_k, w_v):
    B, L, d_model = x.shape
    flat = x.view(B * L, d_model)  # (B·L, d_model)
    q = (flat @ w_q).view(B, L, -1)
    k = (flat @ w_k).view(B, L, -1)
    v = (flat @ w_v).view(B, L, -1)
    return q, k, v
