# Correct: softmax as exp(x - logsumexp(x)) (torch.logsumexp is not torch.softmax); scores by
# einsum with rsqrt; the variance with torch.var (unbiased by default); the scale as a power.
# Type hints, from __future__ import annotations, docstrings and asserts. Full marks.
# expect: full
# %% cell: softmax
from __future__ import annotations

import torch


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """exp(x - logsumexp(x)) along dim: never overflows."""
    return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))
# %% cell: scaled_scores
from __future__ import annotations


def scaled_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    assert q.shape[-1] == k.shape[-1], "queries and keys must have the same width"
    scale = torch.rsqrt(torch.tensor(float(q.shape[-1]), dtype=q.dtype, device=q.device))
    return torch.einsum("...ld,...sd->...ls", q, k) * scale
# %% cell: dot_product_variance
from __future__ import annotations


def dot_product_variance(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    dots = torch.einsum("nd,nd->n", q, k)  # (n,)
    return torch.var(dots)  # unbiased: divided by n - 1
# %% cell: score_scale
from __future__ import annotations


def score_scale(d_k: int, var_q: float = 1.0, var_k: float = 1.0) -> float:
    """c with Var(c · q·k) = c² d_k var_q var_k = 1."""
    return float((d_k * var_q * var_k) ** -0.5)
