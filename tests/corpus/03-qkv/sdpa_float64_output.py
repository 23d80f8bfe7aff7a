# Computes in float64 for accuracy but forgets to cast back: float32 inputs give float64 outputs.
# expect: partial
# hint: dtype float64, expected float32
# %% cell: scaled_dot_product_attention
def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    query, key, value = query.double(), key.double(), value.double()
    L, S = query.size(-2), key.size(-2)
    if scale is None:
        scale = 1 / math.sqrt(query.size(-1))
    scores = query @ key.transpose(-2, -1) * scale
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
