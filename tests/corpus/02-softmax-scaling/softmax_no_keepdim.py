# Reduces without keepdim=True: broadcasting errors, or silently wrong for square inputs.
# expect: partial
# hint: keepdim=True
# %% cell: softmax
def softmax(x, dim=-1):
    e = torch.exp(x - x.max(dim=dim).values)
    return e / e.sum(dim=dim)
