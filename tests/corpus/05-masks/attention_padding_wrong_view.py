# Views key_padding_mask as (B, 1, S) whatever the inputs: right for (B, L, E), but against
# (B, H, L, S) scores the batch lands on the head axis.
# expect: partial
# hint: broadcast along the wrong axes
# Where the shapes cannot broadcast, the crash's hint names the same mistake:
# also: key_padding_mask (B, S) marks keys
# %% cell: masked_attention
def masked_attention(query, key, value, key_padding_mask=None, attn_mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask[:, None, :], float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(attn_mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ value, weights
