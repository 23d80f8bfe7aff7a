# Sets masked scores to 0 instead of -inf.
# expect: partial
# hint: a score of 0 is an ordinary score
# %% cell: masked_attention
def masked_attention(query, key, value, key_padding_mask=None, attn_mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if key_padding_mask is not None:
        B, S = key_padding_mask.shape
        scores = scores.masked_fill(key_padding_mask.view(B, *[1] * (scores.dim() - 2), S), 0.0)
    if attn_mask is not None:
        scores = scores.masked_fill(attn_mask, 0.0)
    weights = scores.softmax(dim=-1)
    return weights @ value, weights
