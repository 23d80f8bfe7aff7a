# Merges the heads with a reshape and no transpose.
# expect: partial
# hint: a reshape alone mixes positions
# MultiHeadAttention's own test names the same mistake in its words:
# also: Your heads are merged with a plain reshape
# %% cell: merge_heads
def merge_heads(x):
    """Concatenate the heads again: the inverse of split_heads.

    x: (B, H, L, D)
    returns (B, L, H·D)
    """
    B, H, L, D = x.shape
    return x.reshape(B, L, H * D)  # (B, L, H·D)
