# Merges the two masks with & : only positions both masks hide are hidden.
# expect: partial
# hint: combine the masks with | (logical or), not &
# %% cell: masked_attention
def masked_attention(query, key, value, key_padding_mask=None, attn_mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    hidden = None
    if key_padding_mask is not None:
        B, S = key_padding_mask.shape
        hidden = key_padding_mask.view(B, *[1] * (scores.dim() - 2), S)
    if attn_mask is not None:
        hidden = attn_mask if hidden is None else hidden & attn_mask
    if hidden is not None:
        scores = scores.masked_fill(hidden, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ value, weights
