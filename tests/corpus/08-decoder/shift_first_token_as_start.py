# Pads with a copy of the first token: F.pad's "replicate" idea, done by hand.
# expect: partial
# hint: does not hold the start token
# also: torch.roll
# %% cell: shift_right
def shift_right(tgt, start_token):
    return torch.cat([tgt[:, :1], tgt[:, :-1]], dim=1)
