# Zeroes the masked weights after the softmax, without renormalising the rows.
# expect: partial
# hint: Mask the scores before the softmax
# %% cell: masked_attention
def masked_attention(query, key, value, key_padding_mask=None, attn_mask=None):
    weights = (query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))).softmax(dim=-1)
    if key_padding_mask is not None:
        B, S = key_padding_mask.shape
        weights = weights.masked_fill(key_padding_mask.view(B, *[1] * (weights.dim() - 2), S), 0.0)
    if attn_mask is not None:
        weights = weights.masked_fill(attn_mask, 0.0)
    return weights @ value, weights
