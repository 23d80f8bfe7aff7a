# Views key_padding_mask as (B, 1, 1, S) whatever the inputs: right with heads, but (B, L, S) scores
# become (B, B, L, S).
# expect: partial
# hint: broadcast along the wrong axes
# %% cell: masked_attention
def masked_attention(query, key, value, key_padding_mask=None, attn_mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(attn_mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ value, weights
