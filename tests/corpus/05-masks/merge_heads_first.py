# Reads a 3-D attn_mask (B*H, L, S) as head-major (H, B, L, S) instead of sentence-major (B, H, L, S).
# expect: partial
# hint: not (H, B, L, S)
# The hint of a 3-D mask's layout names the same mistake:
# also: b·num_heads + h
# %% cell: merge_masks
def merge_masks(key_padding_mask, attn_mask, num_heads):
    if attn_mask is not None and attn_mask.dim() == 3:
        L, S = attn_mask.shape[1:]
        attn_mask = attn_mask.view(num_heads, -1, L, S).transpose(0, 1)
    if key_padding_mask is None:
        return attn_mask
    B, S = key_padding_mask.shape
    padding = key_padding_mask.view(B, 1, 1, S)
    return padding if attn_mask is None else padding | attn_mask
