# A loop over every feature j with the exponent j/d_model: right for the sines, but each cosine
# gets the frequency of its own index 2i+1 instead of its pair's.
# expect: partial
# hint: same frequency as the sine
# %% cell: positional_encoding
def positional_encoding(max_len, d_model):
    pe = torch.zeros(max_len, d_model)
    for pos in range(max_len):
        for j in range(d_model):
            angle = pos / (10000 ** (j / d_model))
            pe[pos, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return pe
