# Reads B from key_padding_mask before viewing a 3-D attn_mask: with no padding mask it raises.
# expect: partial
# graded: merge_masks
# locus: key_padding_mask is none|without key_padding_mask|attn_mask alone|no key_padding_mask|no padding mask
# %% cell: merge_masks
def merge_masks(key_padding_mask, attn_mask, num_heads):
    if key_padding_mask is None:
        B = 1
    else:
        B, S = key_padding_mask.shape
    if attn_mask is not None and attn_mask.dim() == 3:
        L, S = attn_mask.shape[-2:]
        attn_mask = attn_mask.view(B, num_heads, L, S)
    if key_padding_mask is None:
        return attn_mask
    padding = key_padding_mask.view(B, 1, 1, S)
    if attn_mask is None:
        return padding
    return padding | attn_mask
