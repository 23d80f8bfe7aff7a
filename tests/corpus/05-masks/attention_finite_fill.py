# Masks with -30 instead of -inf: the values agree to any tolerance, but masked weights are not 0.
# expect: partial
# hint: Masked positions must get weight exactly 0
# %% cell: masked_attention
def masked_attention(query, key, value, key_padding_mask=None, attn_mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if key_padding_mask is not None:
        B, S = key_padding_mask.shape
        scores = scores.masked_fill(key_padding_mask.view(B, *[1] * (scores.dim() - 2), S), -30.0)
    if attn_mask is not None:
        scores = scores.masked_fill(attn_mask, -30.0)
    weights = scores.softmax(dim=-1)
    return weights @ value, weights
