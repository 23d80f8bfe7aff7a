# Forgets the 1/sqrt(D) scaling.
# expect: partial
# hint: without the scaling
# %% cell: simple_self_attention
def simple_self_attention(x):
    weights = torch.softmax(x @ x.transpose(-2, -1), dim=-1)
    return weights @ x, weights
