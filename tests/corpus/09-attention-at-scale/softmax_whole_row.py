# The stable softmax of chapter 02, by hand: right values, but it reduces every row at once.
# expect: partial
# hint: reduces a whole row at once
# %% cell: online_softmax
def online_softmax(x, block_size):
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)
