# Shifts the wrong way: drops the first token and puts the start token at the end.
# expect: partial
# hint: move to the left
# %% cell: shift_right
def shift_right(tgt, start_token):
    start = torch.full_like(tgt[:, :1], start_token)
    return torch.cat([tgt[:, 1:], start], dim=1)
