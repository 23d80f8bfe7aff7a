# Numbers the positions from 1.
# expect: partial
# hint: Positions start at 0
# %% cell: positional_encoding
def positional_encoding(max_len, d_model):
    position = torch.arange(1, max_len + 1, dtype=torch.float32)[:, None]
    omega = torch.exp(-torch.arange(0, d_model, 2, dtype=torch.float32) * math.log(10000.0) / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * omega)
    pe[:, 1::2] = torch.cos(position * omega)
    return pe
