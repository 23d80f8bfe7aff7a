# Takes D from the wrong dimension: x.size(1) is the number of tokens L.
# expect: partial
# hint: the number of tokens
# %% cell: simple_self_attention
def simple_self_attention(x):
    D = x.size(1)
    weights = torch.softmax(x @ x.transpose(-2, -1) / math.sqrt(D), dim=-1)
    return weights @ x, weights
