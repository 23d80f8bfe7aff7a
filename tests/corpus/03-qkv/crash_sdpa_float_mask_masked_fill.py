# Treats every attn_mask as boolean: masked_fill with a float mask (added values) raises.
# expect: partial
# hint: may be a float mask
# %% cell: scaled_dot_product_attention
def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    L, S = query.size(-2), key.size(-2)
    if scale is None:
        scale = 1 / math.sqrt(query.size(-1))
    scores = query @ key.transpose(-2, -1) * scale
    if is_causal:
        attn_mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ value, weights
