# Replaces infinities by 0 "to avoid nan": masked entries get weight.
# expect: partial
# hint: must get weight exactly 0
# %% cell: softmax
def softmax(x, dim=-1):
    x = torch.nan_to_num(x, neginf=0.0)
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    return e / e.sum(dim=dim, keepdim=True)
