# Always normalises along the last dimension, whatever dim says.
# expect: partial
# hint: not along `dim`
# %% cell: softmax
def softmax(x, dim=-1):
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)
