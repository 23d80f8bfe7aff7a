# Transposes to (B, L, D, H) before the reshape: the heads' features interleave.
# expect: partial
# hint: interleave the heads
# MultiHeadAttention's own test names the same mistake in its words:
# also: Your merged heads interleave their features
# %% cell: merge_heads
def merge_heads(x):
    """Concatenate the heads again: the inverse of split_heads.

    x: (B, H, L, D)
    returns (B, L, H·D)
    """
    B, H, L, D = x.shape
    x = x.permute(0, 2, 3, 1)  # (B, L, D, H)
    return x.reshape(B, L, H * D)  # (B, L, H·D)
