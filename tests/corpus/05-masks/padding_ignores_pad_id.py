# Always compares with 0, whatever pad_id says.
# expect: partial
# hint: compare with the pad_id argument
# %% cell: padding_mask
def padding_mask(tokens, pad_id=0):
    return tokens == 0
