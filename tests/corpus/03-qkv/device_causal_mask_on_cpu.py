# Right values, but the causal mask is made with torch.ones(L, S) and no device=: on a GPU (inputs
# on cuda) masked_fill crashes; the grader finds it without one by running the case on the meta device.
# expect: partial
# hint: On a GPU this crashes
# %% cell: scaled_dot_product_attention
def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    L, S = query.size(-2), key.size(-2)
    if scale is None:
        scale = 1 / math.sqrt(query.size(-1))
    scores = query @ key.transpose(-2, -1) * scale  # (..., L, S)
    if is_causal:
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    weights = scores.softmax(dim=-1)
    return weights @ value, weights
