# Computes in float32 whatever the input: float64 inputs get float32 outputs.
# expect: partial
# hint: expected float64 (the input's)
# %% cell: softmax
def softmax(x, dim=-1):
    x = x.float()
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    return e / e.sum(dim=dim, keepdim=True)
