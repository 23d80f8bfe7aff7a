# Applies attn_mask only when there is no key_padding_mask (if/elif).
# expect: partial
# graded: masked_attention
# locus: ignores attn_mask|both masks|elif|attn_mask when
# %% cell: masked_attention
def masked_attention(query, key, value, key_padding_mask=None, attn_mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if key_padding_mask is not None:
        B, S = key_padding_mask.shape
        padding = key_padding_mask.view(B, *[1] * (scores.dim() - 2), S)
        scores = scores.masked_fill(padding, float("-inf"))
    elif attn_mask is not None:
        scores = scores.masked_fill(attn_mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ value, weights
