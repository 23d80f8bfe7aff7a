# Correct: roll right by one, then overwrite column 0 (roll returns a new tensor).
# expect: full
# %% cell: shift_right
def shift_right(tgt, start_token):
    out = torch.roll(tgt, shifts=1, dims=1)
    out[:, 0] = start_token
    return out
