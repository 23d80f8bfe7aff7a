# Divides the exponent by max_len instead of d_model.
# expect: partial
# graded: positional_encoding
# locus: d_model|max_len|2i/d_model|exponent
# %% cell: positional_encoding
def positional_encoding(max_len, d_model):
    """The sinusoidal positional encoding of the original Transformer.

    returns pe: (max_len, d_model) float32, pe[pos, 2i] = sin(pos / 10000^(2i/d_model)),
    pe[pos, 2i+1] = cos(pos / 10000^(2i/d_model))
    """
    position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)  # (max_len, 1)
    even = torch.arange(0, d_model, 2, dtype=torch.float32)  # (d_model/2,): 2i = 0, 2, 4, ...
    frequency = 1.0 / 10000.0 ** (even / max_len)  # (d_model/2,) = 10000^(-2i/d_model)
    angle = position * frequency  # (max_len, d_model/2)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = angle.sin()  # even features
    pe[:, 1::2] = angle.cos()  # odd features
    return pe
