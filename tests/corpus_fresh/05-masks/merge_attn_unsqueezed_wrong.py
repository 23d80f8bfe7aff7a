# Unsqueezes a 2-D attn_mask (L, S) at dim 1, (L, 1, S), which broadcasts the queries against the heads.
# expect: partial
# graded: merge_masks
# locus: (L, S)|unsqueeze|(1, L, S)|(L, 1, S)
# %% cell: merge_masks
def merge_masks(key_padding_mask, attn_mask, num_heads):
    """One boolean mask (True = not allowed) that hides what nn.MultiheadAttention hides.

    key_padding_mask: None or (B, S) bool, True at padding
    attn_mask: None, (L, S) or (B * num_heads, L, S) bool, True = not allowed (not both None)
    returns: bool, broadcastable to (B, num_heads, L, S)
    """
    if attn_mask is not None and attn_mask.dim() == 3:  # (B*H, L, S): entry b*H + h is sentence b, head h
        L, S = attn_mask.shape[-2:]
        attn_mask = attn_mask.view(-1, num_heads, L, S)  # (B, H, L, S)
    if key_padding_mask is None:
        return attn_mask  # (L, S) or (B, H, L, S)
    B, S = key_padding_mask.shape
    padding = key_padding_mask.view(B, 1, 1, S)  # (B, 1, 1, S): every head, every query
    if attn_mask is None:
        return padding
    return padding | (attn_mask.unsqueeze(1) if attn_mask.dim() == 2 else attn_mask)  # (B, 1, L, S) or (B, H, L, S)
