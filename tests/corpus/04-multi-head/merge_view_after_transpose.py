# Calls .view on the transposed tensor, which fails unless a head or the length is 1.
# expect: partial
# hint: view cannot merge dimensions
# %% cell: merge_heads
def merge_heads(x):
    """Concatenate the heads again: the inverse of split_heads.

    x: (B, H, L, D)
    returns (B, L, H·D)
    """
    B, H, L, D = x.shape
    x = x.transpose(1, 2)  # (B, L, H, D)
    return x.view(B, L, H * D)
