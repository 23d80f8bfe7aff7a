# Prepends the start token but keeps the last token.
# expect: partial
# hint: T + 1 columns
# %% cell: shift_right
def shift_right(tgt, start_token):
    start = torch.full_like(tgt[:, :1], start_token)
    return torch.cat([start, tgt], dim=1)
