# Computes in float32 whatever the input: float64 inputs get float32 outputs.
# expect: partial
# hint: must have the inputs' dtype (float64)
# %% cell: simple_self_attention
def simple_self_attention(x):
    x = x.float()
    weights = torch.softmax(x @ x.transpose(-2, -1) / math.sqrt(x.size(-1)), dim=-1)
    return weights @ x, weights
