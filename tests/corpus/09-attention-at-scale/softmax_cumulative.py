# No blocks at all: the running maximum and the running sum of the whole row at once, by
# torch.cummax and torch.logcumsumexp (the last column of each is the row's), right values.
# expect: partial
# hint: reduces a whole row at once
# %% cell: online_softmax
def online_softmax(x, block_size):
    m = torch.cummax(x, dim=-1).values[..., -1:]  # the row's maximum, as the last running one
    log_l = torch.logcumsumexp(x - m, dim=-1)[..., -1:]  # log of the row's sum, likewise
    return torch.exp(x - m - log_l)
