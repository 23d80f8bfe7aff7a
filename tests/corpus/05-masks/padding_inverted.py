# Marks the real tokens instead of the padding (a "keep" mask, True = may attend).
# expect: partial
# hint: True where the token IS padding
# %% cell: padding_mask
def padding_mask(tokens, pad_id=0):
    return tokens != pad_id
