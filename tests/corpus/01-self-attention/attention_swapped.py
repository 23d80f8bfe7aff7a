# Returns (weights, output) instead of (output, weights).
# expect: partial
# hint: return (output, weights) in this order
# %% cell: simple_self_attention
def simple_self_attention(x):
    weights = torch.softmax(x @ x.transpose(-2, -1) / math.sqrt(x.size(-1)), dim=-1)
    return weights, weights @ x
