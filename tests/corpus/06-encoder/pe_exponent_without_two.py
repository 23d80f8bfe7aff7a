# Uses 10000^(i/d_model) with the pair index i: the factor 2 of the exponent is missing.
# expect: partial
# hint: the factor 2 is missing
# %% cell: positional_encoding
def positional_encoding(max_len, d_model):
    position = torch.arange(max_len).unsqueeze(1).float()
    i = torch.arange(d_model // 2).float()
    angle = position / 10000 ** (i / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe
