# Computes in float32 whatever the input: float64 inputs get float32 outputs.
# expect: partial
# hint: must have the inputs' dtype (float64)
# %% cell: softmax
def softmax(x, dim=-1):
    x = x.float()
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    return e / e.sum(dim=dim, keepdim=True)
