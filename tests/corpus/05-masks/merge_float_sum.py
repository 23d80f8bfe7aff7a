# Does what nn.MultiheadAttention does inside, float masks added, but returns the float sum
# instead of turning it back into a boolean mask.
# expect: partial
# hint: You return a float mask (0 and -inf)
# MultiHeadAttention's masked_fill rejects the float mask, and its crash hint says why:
# also: masked_fill takes a boolean mask
# %% cell: merge_masks
def merge_masks(key_padding_mask, attn_mask, num_heads):
    def as_float(mask):
        return torch.zeros(mask.shape, device=mask.device).masked_fill(mask, float("-inf"))

    total = 0
    if attn_mask is not None:
        if attn_mask.dim() == 3:
            attn_mask = attn_mask.view(-1, num_heads, *attn_mask.shape[1:])
        total = total + as_float(attn_mask)
    if key_padding_mask is not None:
        B, S = key_padding_mask.shape
        total = total + as_float(key_padding_mask.view(B, 1, 1, S))
    return total
