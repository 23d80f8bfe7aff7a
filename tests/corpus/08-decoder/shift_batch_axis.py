# Shifts along dim 0 (the batch) instead of the positions.
# expect: partial
# hint: along the batch axis
# %% cell: shift_right
def shift_right(tgt, start_token):
    start = torch.full_like(tgt[:1], start_token)
    return torch.cat((start, tgt[:-1]), dim=0)
