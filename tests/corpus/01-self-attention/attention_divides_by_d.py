# Divides the scores by D instead of sqrt(D).
# expect: partial
# hint: divided by D
# %% cell: simple_self_attention
def simple_self_attention(x):
    weights = torch.softmax(x @ x.transpose(-2, -1) / x.shape[-1], dim=-1)
    return weights @ x, weights
