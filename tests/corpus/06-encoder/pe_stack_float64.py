# A correct encoding computed in float64 with torch.pow and an outer product, interleaved by
# stacking (sin, cos) on a new last dim and flattening, then cast to float32.
# expect: full
# %% cell: positional_encoding
def positional_encoding(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float64)
    freq = torch.pow(10000.0, -torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angle = torch.outer(pos, freq)  # (max_len, d_model/2)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(-2).float()
