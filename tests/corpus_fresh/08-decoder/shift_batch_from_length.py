# Reads the batch size from tgt.size(1) (the length).
# expect: partial
# graded: shift_right
# locus: size(0)|batch size|tgt.size(1)|(B, 1)
# %% cell: shift_right
def shift_right(tgt, start_token):
    start = tgt.new_full((tgt.size(1), 1), start_token)
    return torch.cat([start, tgt[:, :-1]], dim=1)
