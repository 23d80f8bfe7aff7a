# Correct: torch.cat of a start column and the target without its last column.
# expect: full
# %% cell: shift_right
def shift_right(tgt, start_token):
    start = torch.full((tgt.shape[0], 1), start_token, dtype=tgt.dtype, device=tgt.device)
    return torch.cat((start, tgt[:, :-1]), dim=1)
