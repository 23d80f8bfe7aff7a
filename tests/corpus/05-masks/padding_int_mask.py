# Returns the right positions as integers 0/1 (as the source text's masks are) instead of booleans.
# expect: partial
# hint: expected bool
# %% cell: padding_mask
def padding_mask(tokens, pad_id=0):
    return (tokens == pad_id).long()
