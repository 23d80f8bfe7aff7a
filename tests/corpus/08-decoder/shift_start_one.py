# Hard-codes the start token of the chapter's example (1) instead of the argument.
# expect: partial
# hint: does not hold the start token
# %% cell: shift_right
def shift_right(tgt, start_token):
    bos = torch.ones(tgt.shape[0], 1, dtype=tgt.dtype, device=tgt.device)
    return torch.cat([bos, tgt[:, :-1]], dim=1)
