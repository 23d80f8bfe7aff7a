# Puts the padding on the query axis, (B, 1, S, 1): hides padded queries instead of padded keys.
# expect: partial
# hint: hides the padded QUERIES
# Where L != S the wrong view cannot broadcast, and the crash's hint names the same mistake:
# also: key_padding_mask (B, S) marks keys
# %% cell: merge_masks
def merge_masks(key_padding_mask, attn_mask, num_heads):
    if attn_mask is not None and attn_mask.dim() == 3:
        attn_mask = attn_mask.view(-1, num_heads, *attn_mask.shape[1:])
    if key_padding_mask is None:
        return attn_mask
    B, S = key_padding_mask.shape
    padding = key_padding_mask.view(B, 1, S, 1)
    return padding if attn_mask is None else padding | attn_mask
