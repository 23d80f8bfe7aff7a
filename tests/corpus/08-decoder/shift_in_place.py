# Shifts the caller's tensor in place and returns it.
# expect: partial
# hint: in place
# %% cell: shift_right
def shift_right(tgt, start_token):
    tgt[:, 1:] = tgt[:, :-1].clone()
    tgt[:, 0] = start_token
    return tgt
