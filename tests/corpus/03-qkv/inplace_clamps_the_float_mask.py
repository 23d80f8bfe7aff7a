# Right values, but clamps the caller's float mask in place to avoid -inf (attn_mask.clamp_):
# only the float-mask cases change an input. Issue 12 finding 9.
# expect: partial
# hint: changes its input in place
# %% cell: scaled_dot_product_attention
def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    L, S = query.size(-2), key.size(-2)
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = query @ key.transpose(-2, -1) * scale
    if is_causal:
        causal = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask.clamp_(min=-1e9)  # -inf -> -1e9: the same weights
    weights = scores.softmax(dim=-1)
    return weights @ value, weights
