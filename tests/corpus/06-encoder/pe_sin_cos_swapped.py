# Cosine on the even features and sine on the odd ones.
# expect: partial
# hint: sin and cos are swapped
# %% cell: positional_encoding
def positional_encoding(max_len, d_model):
    position = torch.arange(max_len, dtype=torch.float32)[:, None]
    omega = torch.exp(-torch.arange(0, d_model, 2, dtype=torch.float32) * math.log(10000.0) / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.cos(position * omega)
    pe[:, 1::2] = torch.sin(position * omega)
    return pe
