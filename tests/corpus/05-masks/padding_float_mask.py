# Returns an additive float mask (-inf at padding, 0 elsewhere) instead of a boolean one.
# expect: partial
# hint: You return a float mask (-inf at padding)
# %% cell: padding_mask
def padding_mask(tokens, pad_id=0):
    return torch.zeros(tokens.shape, device=tokens.device).masked_fill(tokens == pad_id, float("-inf"))
