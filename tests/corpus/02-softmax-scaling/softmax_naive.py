# The textbook formula without subtracting the maximum: nan for scores of magnitude 1e4.
# expect: partial
# hint: overflows or underflows
# %% cell: softmax
def softmax(x, dim=-1):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)
