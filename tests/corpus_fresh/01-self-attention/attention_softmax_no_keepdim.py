# Writes the softmax by hand and sums without keepdim, so the sums broadcast along the wrong axis.
# expect: partial
# graded: simple_self_attention
# locus: keepdim
# %% cell: simple_self_attention
def simple_self_attention(x):
    D = x.size(-1)
    scores = x @ x.transpose(-2, -1) / math.sqrt(D)
    exps = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    weights = exps / exps.sum(dim=-1)
    return weights @ x, weights
