# Marks every token <= pad_id as padding (as if the padding id were the smallest).
# expect: partial
# graded: padding_mask
# locus: tokens == pad_id|== pad_id|equal to pad_id|smaller than|ids below
# %% cell: padding_mask
def padding_mask(tokens, pad_id=0):
    return tokens <= pad_id
