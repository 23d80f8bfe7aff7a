# Reshapes to (B, L, E/H, H): head h takes the features h, h+H, ... instead of a
# contiguous block.
# expect: partial
# hint: contiguous block of features
# MultiHeadAttention's own test names the same mistake in its words:
# also: Your heads take interleaved features
# %% cell: split_heads
def split_heads(x, num_heads):
    """Split the features of every position into num_heads heads.

    x: (B, L, E), E divisible by num_heads
    returns (B, H, L, E/H): head h holds features h·E/H ... (h+1)·E/H - 1
    """
    B, L, E = x.shape
    return x.reshape(B, L, E // num_heads, num_heads).permute(0, 3, 1, 2)
