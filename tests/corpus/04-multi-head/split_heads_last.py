# Forgets to move the heads in front of the length: returns (B, L, H, E/H).
# expect: partial
# hint: move the heads before the length
# Where L == H the missing transpose gives what a plain reshape gives, and MultiHeadAttention's test says so:
# also: Your heads look like a plain reshape
# %% cell: split_heads
def split_heads(x, num_heads):
    """Split the features of every position into num_heads heads.

    x: (B, L, E), E divisible by num_heads
    returns (B, H, L, E/H): head h holds features h·E/H ... (h+1)·E/H - 1
    """
    B, L, E = x.shape
    x = x.reshape(B, L, num_heads, E // num_heads)  # (B, L, H, E/H)
    return x  # (B, L, H, E/H)
