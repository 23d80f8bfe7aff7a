# Centres the scores on their mean instead of their maximum.
# expect: partial
# hint: not the mean
# %% cell: softmax
def softmax(x, dim=-1):
    e = (x - x.mean(dim=dim, keepdim=True)).exp()
    return e / e.sum(dim=dim, keepdim=True)
