# The default scale reads the width of the values (Ev) instead of the queries (E).
# expect: partial
# graded: scaled_dot_product_attention
# locus: value's width|values' width|value.size(-1)|width of the values|query.size(-1)
# %% cell: scaled_dot_product_attention
def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    """softmax(query @ keyᵀ · scale + mask) @ value, as F.scaled_dot_product_attention.

    query: (..., L, E); key: (..., S, E); value: (..., S, Ev)
    attn_mask: None, or broadcastable to (..., L, S): bool (True = may attend) or float (added)
    is_causal: query i attends keys 0..i only; scale: None means 1/sqrt(E)
    returns (output, weights): (..., L, Ev), (..., L, S)
    """
    L, S = query.size(-2), key.size(-2)
    if scale is None:
        scale = 1 / math.sqrt(value.size(-1))
    scores = query @ key.transpose(-2, -1) * scale  # (..., L, S)
    if is_causal:
        causal = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    weights = scores.softmax(dim=-1)  # (..., L, S), rows sum to 1
    return weights @ value, weights  # output (..., L, Ev), weights (..., L, S)
