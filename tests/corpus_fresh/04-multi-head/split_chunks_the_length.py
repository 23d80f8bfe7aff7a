# Chunks along the sequence (dim 1) instead of the features: each head gets a stretch of tokens.
# expect: partial
# graded: split_heads
# locus: stretch of the sequence|chunk|along the sequence|positions of the sequence|every token's features
# %% cell: split_heads
def split_heads(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=1), dim=1)
