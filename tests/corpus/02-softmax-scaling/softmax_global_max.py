# Subtracts the maximum of the whole tensor: rows far below it underflow to 0/0.
# expect: partial
# hint: not the maximum of the whole tensor
# %% cell: softmax
def softmax(x, dim=-1):
    e = torch.exp(x - x.max())
    return e / e.sum(dim=dim, keepdim=True)
