# Builds the result with torch.full, int64 whatever the dtype of tgt.
# expect: partial
# graded: shift_right
# locus: dtype|int32|int64
# %% cell: shift_right
def shift_right(tgt, start_token):
    shifted = torch.full(tgt.shape, start_token, device=tgt.device)
    shifted[:, 1:] = tgt[:, :-1]
    return shifted
