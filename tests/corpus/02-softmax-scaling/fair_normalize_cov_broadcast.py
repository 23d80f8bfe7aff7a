# Correct: softmax divides the shifted exponentials by their sum with F.normalize(p=1) (an L1
# normalisation is not torch.softmax), F imported the way some tutorials write it; scores by
# broadcasting every query against every key; the variance of the dot products with torch.cov
# (unbiased); the scale with sqrt taken from math by name. Full marks.
# expect: full
# %% cell: softmax
from torch.nn import functional as F


def softmax(x, dim=-1):
    exps = (x - x.max(dim=dim, keepdim=True).values).exp()
    return F.normalize(exps, p=1.0, dim=dim)
# %% cell: scaled_scores
def scaled_scores(q, k):
    products = q.unsqueeze(-2) * k.unsqueeze(-3)  # (..., L, S, d_k)
    return products.sum(dim=-1) / q.shape[-1] ** 0.5
# %% cell: dot_product_variance
def dot_product_variance(q, k):
    return torch.cov((q * k).sum(dim=1))  # one variable, n observations: its unbiased variance
# %% cell: score_scale
from math import sqrt


def score_scale(d_k, var_q=1.0, var_k=1.0):
    return 1.0 / sqrt(d_k) / sqrt(var_q * var_k)
