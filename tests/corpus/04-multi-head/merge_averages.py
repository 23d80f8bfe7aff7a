# Averages the heads instead of concatenating them (and its MultiHeadAttention,
# which uses it, gets a (B, L, E/H) input for out_proj).
# expect: partial
# hint: You average the heads
# %% cell: merge_heads
def merge_heads(x):
    """Concatenate the heads again: the inverse of split_heads.

    x: (B, H, L, D)
    returns (B, L, H·D)
    """
    B, H, L, D = x.shape
    x = x.transpose(1, 2)  # (B, L, H, D)
    return x.mean(dim=2)  # (B, L, D)
