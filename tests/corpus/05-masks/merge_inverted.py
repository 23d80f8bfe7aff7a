# Returns the positions that may be attended (converted to F.scaled_dot_product_attention's
# convention) instead of those that are not allowed.
# expect: partial
# hint: True where attention is allowed
# The polarity hint names the same mistake (True where attention is allowed):
# also: polarity of your boolean
# %% cell: merge_masks
def merge_masks(key_padding_mask, attn_mask, num_heads):
    if attn_mask is not None and attn_mask.dim() == 3:
        attn_mask = attn_mask.view(-1, num_heads, *attn_mask.shape[1:])
    if key_padding_mask is None:
        return ~attn_mask
    B, S = key_padding_mask.shape
    keep = ~key_padding_mask.view(B, 1, 1, S)
    return keep if attn_mask is None else keep & ~attn_mask
