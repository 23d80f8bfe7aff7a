# Shifts x in place (x -= max): the caller's tensor changes.
# expect: partial
# graded: softmax
# locus: in place|in-place|inplace
# %% cell: softmax
def softmax(x, dim=-1):
    x -= x.amax(dim=dim, keepdim=True)
    exps = x.exp()
    return exps / exps.sum(dim=dim, keepdim=True)
