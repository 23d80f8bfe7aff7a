# Counts the real tokens and masks the positions after them: right only when padding is at the end.
# expect: partial
# hint: assumes the padding is at the end
# %% cell: padding_mask
def padding_mask(tokens, pad_id=0):
    lengths = (tokens != pad_id).sum(dim=1, keepdim=True)  # (B, 1)
    positions = torch.arange(tokens.shape[1], device=tokens.device)[None, :]  # (1, S)
    return positions >= lengths
