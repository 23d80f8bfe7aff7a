# Makes the start column (B,) instead of (B, 1) and concatenates it along dim 1.
# expect: partial
# graded: shift_right
# locus: (B, 1)|[:, None]|unsqueeze|start column
# %% cell: shift_right
def shift_right(tgt, start_token):
    start = tgt.new_full((tgt.size(0),), start_token)
    return torch.cat([start, tgt[:, :-1]], dim=1)
