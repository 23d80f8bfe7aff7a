# Correct, in a careful student's style: from __future__ import annotations, type hints, asserts
# and docstrings; the scores with torch.einsum, the weights with F.softmax (imported by the
# student: 01's setup gives no F), the output with einsum again. Full marks.
# expect: full
# %% cell: attention_scores
from __future__ import annotations

import torch


def attention_scores(x: torch.Tensor) -> torch.Tensor:
    """scores[b, i, j] = x[b, i] · x[b, j], for x of shape (B, L, D)."""
    assert x.dim() == 3, f"expected (B, L, D), got {tuple(x.shape)}"
    return torch.einsum("bid,bjd->bij", x, x)  # (B, L, L)
# %% cell: simple_self_attention
from __future__ import annotations

from typing import Tuple

import torch.nn.functional as F


def simple_self_attention(x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """(output, weights) of parameter-free self-attention."""
    d_model: int = x.shape[-1]
    weights = F.softmax(attention_scores(x) / d_model**0.5, dim=-1)  # (B, L, L)
    assert torch.allclose(weights.sum(-1), torch.ones_like(weights[..., 0]), atol=1e-3)
    output = torch.einsum("bij,bjd->bid", weights, x)  # (B, L, D)
    return output, weights
