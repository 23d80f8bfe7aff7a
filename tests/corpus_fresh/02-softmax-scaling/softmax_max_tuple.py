# Subtracts x.max(dim=...) itself, which is a (values, indices) pair, not a tensor.
# expect: partial
# graded: softmax
# locus: return_types|.values|values and indices|(values, indices)|amax|max(dim
# %% cell: softmax
def softmax(x, dim=-1):
    shifted = x - x.max(dim=dim, keepdim=True)
    exps = shifted.exp()
    return exps / exps.sum(dim=dim, keepdim=True)
