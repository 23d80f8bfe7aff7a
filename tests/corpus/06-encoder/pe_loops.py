# A correct encoding with Python loops over positions and feature pairs, math.sin/math.cos,
# and torch.tensor on a nested list (float32 by default).
# expect: full
# %% cell: positional_encoding
def positional_encoding(max_len, d_model):
    rows = []
    for pos in range(max_len):
        row = []
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            row += [math.sin(angle), math.cos(angle)]
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float32).reshape(max_len, d_model)
