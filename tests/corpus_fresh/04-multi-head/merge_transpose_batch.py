# Transposes dims 0 and 2 (batch and length) instead of 1 and 2 before the reshape.
# expect: partial
# graded: merge_heads
# locus: transpose(0, 2)|dims 1 and 2|(B, L, H, D)|batch and length
# %% cell: merge_heads
def merge_heads(x):
    B, H, L, D = x.size()
    return x.transpose(0, 2).reshape(B, L, H * D)
