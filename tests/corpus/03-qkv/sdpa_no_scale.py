# Forgets the 1/sqrt(d_k) scaling (and so ignores `scale` too).
# expect: partial
# hint: is the 1/sqrt(d_k) scaling missing?
# A case with scale= names the same mistake in its words:
# also: Your scores are not scaled
# %% cell: scaled_dot_product_attention
def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    L, S = query.size(-2), key.size(-2)
    scores = query @ key.transpose(-2, -1)
    if is_causal:
        causal = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    weights = scores.softmax(dim=-1)
    return weights @ value, weights
