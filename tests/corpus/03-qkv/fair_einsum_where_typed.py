# Correct: projections with einsum; attention with torch.where for the boolean and causal masks
# (a tril made on the query's device), F.softmax, Optional type hints, from __future__ import
# annotations and a docstring. Full marks.
# expect: full
# %% cell: project_qkv
from __future__ import annotations

import torch


def project_qkv(x: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor, w_v: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return tuple(torch.einsum("...ld,dk->...lk", x, w) for w in (w_q, w_k, w_v))
# %% cell: scaled_dot_product_attention
from __future__ import annotations

from typing import Optional

NEG_INF = float("-inf")


def scaled_dot_product_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                 attn_mask: Optional[torch.Tensor] = None, is_causal: bool = False,
                                 scale: Optional[float] = None):
    """softmax(q kᵀ · scale + mask) v, returned with the weights."""
    L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
    scale = E**-0.5 if scale is None else scale
    scores = torch.einsum("...le,...se->...ls", query, key) * scale
    if is_causal:
        allowed = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(diagonal=0)
        scores = torch.where(allowed, scores, torch.full_like(scores, NEG_INF))
    if attn_mask is not None:
        if attn_mask.dtype is torch.bool:
            scores = torch.where(attn_mask, scores, torch.tensor(NEG_INF, dtype=scores.dtype, device=scores.device))
        else:
            scores = scores + attn_mask
    weights = F.softmax(scores, dim=-1)
    return torch.einsum("...ls,...sv->...lv", weights, value), weights
