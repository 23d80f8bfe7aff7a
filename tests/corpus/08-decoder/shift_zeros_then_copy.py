# Shifts into a tensor of zeros and forgets to write the start token.
# expect: partial
# hint: does not hold the start token
# %% cell: shift_right
def shift_right(tgt, start_token):
    out = torch.zeros_like(tgt)
    out[:, 1:] = tgt[:, :-1]
    return out
