# Computes the weights right, but takes the output from F.scaled_dot_product_attention with the mask
# as it is: that function reads True as "may attend".
# expect: partial
# hint: F.scaled_dot_product_attention reads a boolean mask as True = MAY attend
# %% cell: masked_attention
def masked_attention(query, key, value, key_padding_mask=None, attn_mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    hidden = None
    if key_padding_mask is not None:
        B, S = key_padding_mask.shape
        hidden = key_padding_mask.view(B, *[1] * (scores.dim() - 2), S)
    if attn_mask is not None:
        hidden = attn_mask if hidden is None else hidden | attn_mask
    if hidden is not None:
        scores = scores.masked_fill(hidden, float("-inf"))
    output = F.scaled_dot_product_attention(query, key, value, attn_mask=hidden)
    return output, scores.softmax(dim=-1)
