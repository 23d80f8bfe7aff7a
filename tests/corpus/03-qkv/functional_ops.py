# A correct solution with F.linear, baddbmm-free torch.matmul, an additive float mask built
# from the boolean one, and the causal mask built with torch.arange.
# expect: full
# %% cell: project_qkv
def project_qkv(x, w_q, w_k, w_v):
    return F.linear(x, w_q.T), F.linear(x, w_k.T), F.linear(x, w_v.T)
# %% cell: scaled_dot_product_attention
def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    L, S = query.size(-2), key.size(-2)
    factor = scale if scale is not None else 1 / math.sqrt(query.size(-1))
    bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)
    if is_causal:
        rows = torch.arange(L, device=query.device)[:, None]
        cols = torch.arange(S, device=query.device)[None, :]
        bias = bias.masked_fill(cols > rows, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            bias = bias + torch.zeros_like(attn_mask, dtype=query.dtype).masked_fill(~attn_mask, float("-inf"))
        else:
            bias = bias + attn_mask
    weights = torch.softmax(torch.matmul(query, key.mT) * factor + bias, dim=-1)
    return torch.matmul(weights, value), weights
