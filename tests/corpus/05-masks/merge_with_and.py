# Combines the two masks with & (both must mask) instead of | (either masks).
# expect: partial
# hint: combine them with | (logical or)
# %% cell: merge_masks
def merge_masks(key_padding_mask, attn_mask, num_heads):
    if attn_mask is not None and attn_mask.dim() == 3:
        attn_mask = attn_mask.view(-1, num_heads, *attn_mask.shape[1:])
    if key_padding_mask is None:
        return attn_mask
    B, S = key_padding_mask.shape
    padding = key_padding_mask.view(B, 1, 1, S)
    return padding if attn_mask is None else padding & attn_mask
