# Treats the masks as "keep" masks (True = may attend), as in F.scaled_dot_product_attention or the
# source text's masked_fill(mask == 0, -1e9): masks exactly the allowed positions.
# expect: partial
# hint: Your mask is inverted
# %% cell: masked_attention
def masked_attention(query, key, value, key_padding_mask=None, attn_mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if key_padding_mask is not None:
        B, S = key_padding_mask.shape
        padding = key_padding_mask.view(B, *[1] * (scores.dim() - 2), S)
        scores = scores.masked_fill(padding == 0, float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(attn_mask == 0, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ value, weights
