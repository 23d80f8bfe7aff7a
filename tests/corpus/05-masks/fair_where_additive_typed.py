# Correct: masks from comparisons (eq, arange), merge_masks with torch.logical_or and unflatten,
# masked_attention with torch.where, MultiHeadAttention turning every mask, boolean or float,
# into an additive float bias (0 / -inf, or the float as given) and summing them; type hints and
# from __future__ import annotations. Full marks.
# expect: full
# %% cell: padding_mask
from __future__ import annotations


def padding_mask(tokens: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    return tokens.eq(pad_id)
# %% cell: causal_mask
from __future__ import annotations


def causal_mask(size: int) -> torch.Tensor:
    positions = torch.arange(size)
    return positions[None, :] > positions[:, None]  # key j after query i
# %% cell: merge_masks
from __future__ import annotations

from typing import Optional


def merge_masks(key_padding_mask: Optional[torch.Tensor], attn_mask: Optional[torch.Tensor],
                num_heads: int) -> torch.Tensor:
    masks = []
    if key_padding_mask is not None:
        masks.append(key_padding_mask[:, None, None, :])  # (B, 1, 1, S)
    if attn_mask is not None:
        masks.append(attn_mask.unflatten(0, (-1, num_heads)) if attn_mask.dim() == 3 else attn_mask)
    assert masks, "at least one mask"
    merged = masks[0]
    for mask in masks[1:]:
        merged = torch.logical_or(merged, mask)
    return merged
# %% cell: masked_attention
from __future__ import annotations


def masked_attention(query, key, value, key_padding_mask=None, attn_mask=None):
    scores = torch.matmul(query, key.transpose(-1, -2)) / math.sqrt(query.shape[-1])
    hidden = torch.zeros(scores.shape[-2:], dtype=torch.bool, device=scores.device)
    if attn_mask is not None:
        hidden = hidden | attn_mask
    if key_padding_mask is not None:
        extra = (1,) * (scores.dim() - 2)
        hidden = hidden | key_padding_mask.reshape(key_padding_mask.shape[0], *extra, key_padding_mask.shape[1])
    scores = torch.where(hidden, torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device), scores)
    weights = F.softmax(scores, dim=-1)
    return torch.matmul(weights, value), weights
# %% cell: MultiHeadAttention
from __future__ import annotations


def additive(mask: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor | None:
    """A mask as a bias to add to the scores: boolean True -> -inf, float as given."""
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=like.dtype, device=like.device).masked_fill(mask, float("-inf"))
    return mask.to(like.dtype)


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int, bias: bool = True):
        super().__init__()
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim)) if bias else None
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        nn.init.xavier_uniform_(self.in_proj_weight)

    def forward(self, query, key, value, key_padding_mask=None, attn_mask=None, need_weights=True,
                average_attn_weights=True):
        B, L, E = query.shape
        S, H = key.shape[1], self.num_heads
        b = self.in_proj_bias
        heads = [F.linear(t, self.in_proj_weight[i * E:(i + 1) * E], None if b is None else b[i * E:(i + 1) * E])
                 .view(B, -1, H, self.head_dim).transpose(1, 2) for i, t in enumerate((query, key, value))]
        q, k, v = heads
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)  # (B, H, L, S)
        padding = additive(key_padding_mask, scores)
        if padding is not None:
            scores = scores + padding.view(B, 1, 1, S)
        bias = additive(attn_mask, scores)
        if bias is not None:
            scores = scores + (bias.view(B, H, L, S) if bias.dim() == 3 else bias)
        weights = F.softmax(scores, dim=-1)
        out = self.out_proj((weights @ v).transpose(1, 2).reshape(B, L, E))
        if not need_weights:
            return out, None
        return out, weights.mean(dim=1) if average_attn_weights else weights
