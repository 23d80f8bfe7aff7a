# A correct solution written with einsum and a hand-written stable softmax.
# expect: full
# %% cell: attention_scores
def attention_scores(x):
    return torch.einsum("bld,bmd->blm", x, x)
# %% cell: simple_self_attention
def simple_self_attention(x):
    d = x.shape[-1]
    scores = torch.einsum("bld,bmd->blm", x, x) * d ** -0.5
    e = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
    weights = e / e.sum(dim=-1, keepdim=True)
    return torch.einsum("blm,bmd->bld", weights, x), weights
