# Concatenates all the sines, then all the cosines (as some implementations do) instead of
# interleaving them.
# expect: partial
# hint: interleave them
# %% cell: positional_encoding
def positional_encoding(max_len, d_model):
    position = torch.arange(max_len, dtype=torch.float32)[:, None]
    omega = 1.0 / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    return torch.cat([torch.sin(position * omega), torch.cos(position * omega)], dim=-1)
