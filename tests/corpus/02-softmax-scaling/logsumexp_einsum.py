# A correct solution with logsumexp (allowed: it is not a softmax), einsum and torch.var.
# expect: full
# %% cell: softmax
def softmax(x, dim=-1):
    return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))
# %% cell: scaled_scores
def scaled_scores(q, k):
    return torch.einsum("...ld,...sd->...ls", q, k) / q.shape[-1] ** 0.5
# %% cell: dot_product_variance
def dot_product_variance(q, k):
    return torch.var(torch.einsum("nd,nd->n", q, k))
# %% cell: score_scale
def score_scale(d_k, var_q=1.0, var_k=1.0):
    return d_k ** -0.5 * (var_q * var_k) ** -0.5
