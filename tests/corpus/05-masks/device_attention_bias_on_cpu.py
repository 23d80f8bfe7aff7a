# Right values, but the additive mask is made with torch.zeros(L, S, dtype=...) and no device=, then
# filled where attn_mask is True: on a GPU (masks on cuda) that masked_fill crashes.
# expect: partial
# hint: On a GPU this crashes
# %% cell: masked_attention
def masked_attention(query, key, value, key_padding_mask=None, attn_mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))  # (B, [H,] L, S)
    if key_padding_mask is not None:
        B, S = key_padding_mask.shape
        padding = key_padding_mask.view(B, *[1] * (scores.dim() - 2), S)
        scores = scores.masked_fill(padding, float("-inf"))
    if attn_mask is not None:
        L, S = attn_mask.shape
        bias = torch.zeros(L, S, dtype=scores.dtype)
        bias = bias.masked_fill(attn_mask, float("-inf"))  # (L, S): -inf where not allowed
        scores = scores + bias
    weights = scores.softmax(dim=-1)
    return weights @ value, weights
