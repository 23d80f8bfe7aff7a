# A correct solution with explicit Python loops over the slices, that prints and warns while it
# works; the scores are scaled by scaling q and k by d_k ** -0.25 each, and the variance uses
# E[s²] - E[s]² with Bessel's correction.
# expect: full
# %% cell: softmax
import warnings


def softmax(x, dim=-1):
    print("softmax along", dim, "of", tuple(x.shape))
    warnings.warn("slow loops ahead")
    moved = x.movedim(dim, -1)
    rows = moved.reshape(-1, moved.shape[-1])
    out = torch.empty_like(rows)
    for i in range(rows.shape[0]):
        row = rows[i]
        biggest = max(row.tolist())
        e = torch.exp(row - biggest)
        out[i] = e / e.sum()
    return out.reshape(moved.shape).movedim(-1, dim)
# %% cell: scaled_scores
def scaled_scores(q, k):
    factor = q.shape[-1] ** -0.25
    return torch.matmul(q * factor, (k * factor).transpose(-1, -2))
# %% cell: dot_product_variance
def dot_product_variance(q, k):
    n = q.shape[0]
    s = (q * k).sum(1)
    return ((s**2).mean() - s.mean() ** 2) * n / (n - 1)
# %% cell: score_scale
import numpy as np


def score_scale(d_k, var_q=1.0, var_k=1.0):
    print("variance of q·k:", d_k * var_q * var_k)
    return float(np.sqrt(1.0 / (d_k * var_q * var_k)))
