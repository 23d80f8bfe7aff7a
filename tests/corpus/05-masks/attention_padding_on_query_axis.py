# Puts key_padding_mask on the query axis (unsqueeze(-1)): hides padded queries, not padded keys.
# expect: partial
# hint: hides padded QUERIES
# Where L != S the wrong view cannot broadcast, and the crash's hint names the same mistake:
# also: key_padding_mask (B, S) marks keys
# %% cell: masked_attention
def masked_attention(query, key, value, key_padding_mask=None, attn_mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if key_padding_mask is not None:
        padding = key_padding_mask.unsqueeze(-1)  # (B, S, 1)
        if scores.dim() == 4:
            padding = padding.unsqueeze(1)  # (B, 1, S, 1)
        scores = scores.masked_fill(padding, float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(attn_mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ value, weights
