# Returns the mask already viewed for the scores of multi-head attention, (B, 1, 1, S).
# expect: partial
# hint: padding_mask returns shape (B, S)
# %% cell: padding_mask
def padding_mask(tokens, pad_id=0):
    return (tokens == pad_id).unsqueeze(1).unsqueeze(2)
