# Subtracts the maximum of the last dim whatever dim is: for dim != -1 the shift is not constant along dim.
# expect: partial
# graded: softmax
# locus: maximum along|max along|maximum of the last|along `dim`|along dim
# %% cell: softmax
def softmax(x, dim=-1):
    shifted = x - x.amax(dim=-1, keepdim=True)
    exps = shifted.exp()
    return exps / exps.sum(dim=dim, keepdim=True)
