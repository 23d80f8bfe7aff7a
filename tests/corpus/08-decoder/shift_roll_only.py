# torch.roll alone: the last token comes round to the front.
# expect: partial
# hint: torch.roll
# %% cell: shift_right
def shift_right(tgt, start_token):
    return tgt.roll(1, dims=1)
