# flatten(1) after the transpose also folds the length: (B, L·H·D) instead of (B, L, H·D).
# expect: partial
# graded: merge_heads
# locus: flatten|(B, L, H·D)|L·H·D
# %% cell: merge_heads
def merge_heads(x):
    return x.transpose(1, 2).flatten(1)
