# A correct solution written with einsum and torch.where.
# expect: full
# %% cell: project_qkv
def project_qkv(x, w_q, w_k, w_v):
    q = torch.einsum("...ld,dk->...lk", x, w_q)
    k = torch.einsum("...ld,dk->...lk", x, w_k)
    v = torch.einsum("...ld,dv->...lv", x, w_v)
    return q, k, v
# %% cell: scaled_dot_product_attention
def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    d_k = query.shape[-1]
    scale = d_k ** -0.5 if scale is None else scale
    scores = torch.einsum("...le,...se->...ls", query, key) * scale
    minus_inf = torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device)
    if is_causal:
        L, S = scores.shape[-2:]
        allowed = torch.tril(torch.ones(L, S, device=scores.device)).bool()
        scores = torch.where(allowed, scores, minus_inf)
    if attn_mask is not None:
        scores = torch.where(attn_mask, scores, minus_inf) if attn_mask.dtype == torch.bool else scores + attn_mask
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("...ls,...sv->...lv", weights, value), weights
