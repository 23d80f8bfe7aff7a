# Takes D from the first dimension: x.size(0) is the batch size B.
# expect: partial
# graded: simple_self_attention
# locus: sqrt(B)|batch size|x.size(0)|size(0)|first dimension
# %% cell: simple_self_attention
def simple_self_attention(x):
    D = x.size(0)
    weights = torch.softmax(x @ x.transpose(-2, -1) / math.sqrt(D), dim=-1)
    return weights @ x, weights
