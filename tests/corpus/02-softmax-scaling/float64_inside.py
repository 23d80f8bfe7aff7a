# A correct solution that computes in float64 and casts back to the input's dtype, with the
# maximum taken by torch.max and masked entries handled by torch.where.
# expect: full
# %% cell: softmax
def softmax(x, dim=-1):
    x64 = x.double()
    top = torch.max(x64, dim=dim, keepdim=True).values
    e = torch.where(torch.isneginf(x64), torch.zeros_like(x64), torch.exp(x64 - top))
    return (e / torch.sum(e, dim=dim, keepdim=True)).to(x.dtype)
# %% cell: scaled_scores
def scaled_scores(q, k):
    scores = q.double() @ k.double().mT / math.sqrt(q.size(-1))
    return scores.to(q.dtype)
# %% cell: dot_product_variance
def dot_product_variance(q, k):
    s = torch.bmm(q.double().unsqueeze(1), k.double().unsqueeze(2)).flatten()
    return s.var(correction=1).to(q.dtype)
# %% cell: score_scale
def score_scale(d_k, var_q=1.0, var_k=1.0):
    std = math.sqrt(d_k) * math.sqrt(var_q) * math.sqrt(var_k)
    return 1.0 / std
