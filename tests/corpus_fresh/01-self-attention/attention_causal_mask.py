# Adds a causal mask to the scores before the softmax: token i does not see the later tokens.
# expect: partial
# graded: simple_self_attention
# locus: causal|future|later tokens|tril|triu|j > i|diagonal
# %% cell: simple_self_attention
def simple_self_attention(x):
    L, D = x.size(-2), x.size(-1)
    scores = x @ x.transpose(-2, -1) / math.sqrt(D)
    future = torch.ones(L, L, dtype=torch.bool, device=x.device).triu(1)
    weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    return weights @ x, weights
