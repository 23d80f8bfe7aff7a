# Splits the heads with a reshape and no transpose, so each head gets a piece of
# the sequence; MultiHeadAttention uses it and fails too.
# expect: partial
# hint: a reshape alone cuts the memory
# MultiHeadAttention's own test names the same mistake in its words:
# also: Your heads look like a plain reshape
# %% cell: split_heads
def split_heads(x, num_heads):
    """Split the features of every position into num_heads heads.

    x: (B, L, E), E divisible by num_heads
    returns (B, H, L, E/H): head h holds features h·E/H ... (h+1)·E/H - 1
    """
    B, L, E = x.shape
    return x.reshape(B, num_heads, L, E // num_heads)
