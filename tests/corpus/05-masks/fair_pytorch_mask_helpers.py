# Correct: causal_mask from nn.Transformer.generate_square_subsequent_mask (what the contract
# compares with), merge_masks with torch.logical_or over the masks given, padding_mask with
# torch.eq. Full marks.
# expect: full
# %% cell: padding_mask
def padding_mask(tokens, pad_id=0):
    return torch.eq(tokens, pad_id)
# %% cell: causal_mask
def causal_mask(size):
    return nn.Transformer.generate_square_subsequent_mask(size, device=torch.device("cpu")) == float("-inf")
# %% cell: merge_masks
def merge_masks(key_padding_mask, attn_mask, num_heads):
    masks = []
    if attn_mask is not None:
        masks.append(attn_mask if attn_mask.dim() == 2 else attn_mask.view(-1, num_heads, *attn_mask.shape[1:]))
    if key_padding_mask is not None:
        masks.append(key_padding_mask[:, None, None, :])
    if len(masks) == 1:
        return masks[0]
    return torch.logical_or(*masks)
