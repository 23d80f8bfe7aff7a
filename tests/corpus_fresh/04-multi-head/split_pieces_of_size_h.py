# x.split(num_heads, dim=-1) cuts pieces of SIZE num_heads, not num_heads pieces: E/H heads of H features.
# expect: partial
# graded: split_heads
# locus: pieces of size|split(|E/H heads|size num_heads|split size
# %% cell: split_heads
def split_heads(x, num_heads):
    return torch.stack(x.split(num_heads, dim=-1), dim=1)
