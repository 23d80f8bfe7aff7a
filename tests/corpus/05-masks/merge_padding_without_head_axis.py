# Views key_padding_mask as (B, 1, S), as for attention without heads: against (B, H, L, S) the batch
# lands on the head axis.
# expect: partial
# hint: must be viewed as (B, 1, 1, S)
# Where the shapes cannot broadcast, the crash's hint names the same mistake:
# also: key_padding_mask (B, S) marks keys
# %% cell: merge_masks
def merge_masks(key_padding_mask, attn_mask, num_heads):
    if attn_mask is not None and attn_mask.dim() == 3:
        attn_mask = attn_mask.view(-1, num_heads, *attn_mask.shape[1:])
    if key_padding_mask is None:
        return attn_mask
    padding = key_padding_mask.unsqueeze(1)  # (B, 1, S)
    return padding if attn_mask is None else padding | attn_mask
