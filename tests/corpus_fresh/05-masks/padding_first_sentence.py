# Compares the first sentence only: one row (S,) for the whole batch.
# expect: partial
# graded: padding_mask
# locus: (B, S)|every sentence|first sentence|tokens[0]|one row per sentence
# %% cell: padding_mask
def padding_mask(tokens, pad_id=0):
    return tokens[0] == pad_id
