# Adds the input to the output (a residual connection that belongs to a Transformer layer, not to attention).
# expect: partial
# graded: simple_self_attention
# locus: residual|x + |adds x|plus x|the input itself|+ x
# %% cell: simple_self_attention
def simple_self_attention(x):
    D = x.size(-1)
    weights = torch.softmax(x @ x.transpose(-2, -1) / math.sqrt(D), dim=-1)
    return x + weights @ x, weights
