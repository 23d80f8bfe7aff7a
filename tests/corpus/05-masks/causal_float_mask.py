# Returns PyTorch's float causal mask (0 and -inf) instead of a boolean one.
# expect: partial
# hint: You return a float mask (0 and -inf
# %% cell: causal_mask
def causal_mask(size):
    return nn.Transformer.generate_square_subsequent_mask(size)
