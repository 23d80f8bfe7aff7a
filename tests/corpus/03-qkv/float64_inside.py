# A correct solution that computes in float64 and casts back to the input's dtype,
# masking with a large negative number instead of -inf and scaling q before the product.
# expect: full
# %% cell: project_qkv
def project_qkv(x, w_q, w_k, w_v):
    x64 = x.double()
    return tuple((x64 @ w.double()).to(x.dtype) for w in (w_q, w_k, w_v))
# %% cell: scaled_dot_product_attention
def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    q, k, v = query.double(), key.double(), value.double()
    if scale is None:
        scale = 1 / q.size(-1) ** 0.5
    scores = torch.matmul(q * scale, k.transpose(-1, -2))
    L, S = scores.shape[-2], scores.shape[-1]
    if is_causal:
        upper = torch.triu(torch.ones(L, S, dtype=torch.bool, device=q.device), diagonal=1)
        scores = scores.masked_fill(upper, -1e9)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(attn_mask.logical_not(), -1e9)
        else:
            scores = scores + attn_mask.double()
    weights = F.softmax(scores, dim=-1)
    output = weights @ v
    return output.to(query.dtype), weights.to(query.dtype)
