# Permutes to (B, H, E/H, L): the length and the features of each head are swapped.
# expect: partial
# graded: split_heads
# locus: (B, H, L, E/H)|permute|last two|length and the features
# %% cell: split_heads
def split_heads(x, num_heads):
    B, L, E = x.shape
    return x.reshape(B, L, num_heads, E // num_heads).permute(0, 2, 3, 1)
