# Correct, typed: online_softmax reads x.split(block_size) for the running maximum and sum and
# normalises elementwise at the end; flash_attention splits queries and keys into tiles with
# torch.split, einsum for a tile's scores and torch.where for the causal part, the tiles of the
# output concatenated at the end; KVCache as a dataclass whose fields default to None;
# GroupedQueryAttention shares key/value heads with expand and reshape, builds the causal mask
# with triu and an offset, and takes F.softmax. Full marks.
# expect: full
# %% cell: online_softmax
from __future__ import annotations


def online_softmax(x: torch.Tensor, block_size: int) -> torch.Tensor:
    running_max = torch.full_like(x[..., :1], float("-inf"))  # (..., 1)
    running_sum = torch.zeros_like(x[..., :1])
    for block in x.split(block_size, dim=-1):
        new_max = torch.maximum(running_max, block.amax(dim=-1, keepdim=True))
        running_sum = running_sum * torch.exp(running_max - new_max) + torch.exp(block - new_max).sum(-1, keepdim=True)
        running_max = new_max
    return torch.exp(x - running_max) / running_sum
# %% cell: flash_attention
from __future__ import annotations


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_size: int,
                    causal: bool = False) -> torch.Tensor:
    scale = 1.0 / math.sqrt(q.shape[-1])
    outputs = []
    for i, q_tile in enumerate(q.split(block_size, dim=-2)):
        q0 = i * block_size
        rows = torch.arange(q0, q0 + q_tile.shape[-2], device=q.device)[:, None]  # (b, 1)
        m = torch.full((*q_tile.shape[:-1], 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros_like(m)
        acc = torch.zeros((*q_tile.shape[:-1], v.shape[-1]), dtype=q.dtype, device=q.device)
        for j, (k_tile, v_tile) in enumerate(zip(k.split(block_size, dim=-2), v.split(block_size, dim=-2))):
            k0 = j * block_size
            if causal and k0 > q0 + q_tile.shape[-2] - 1:
                break  # every key of this tile and the next comes after every query of this tile
            s = torch.einsum("...ie,...je->...ij", q_tile, k_tile) * scale
            if causal:
                cols = torch.arange(k0, k0 + k_tile.shape[-2], device=q.device)[None, :]  # (1, b)
                s = torch.where(cols <= rows, s, torch.tensor(float("-inf"), dtype=s.dtype, device=s.device))
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            p = torch.exp(s - m_new)
            correction = torch.exp(m - m_new)
            l = l * correction + p.sum(dim=-1, keepdim=True)
            acc = acc * correction + torch.einsum("...ij,...jd->...id", p, v_tile)
            m = m_new
        outputs.append(acc / l)
    return torch.cat(outputs, dim=-2)
# %% cell: grouped_query_attention
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple


@dataclass
class KVCache:
    """Everything cached so far, (B, heads, n, head_dim); None while empty."""

    keys: Optional[torch.Tensor] = None
    values: Optional[torch.Tensor] = None

    def __len__(self) -> int:
        return 0 if self.keys is None else self.keys.shape[-2]

    def update(self, k: torch.Tensor, v: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        self.keys = k if self.keys is None else torch.cat([self.keys, k], dim=-2)
        self.values = v if self.values is None else torch.cat([self.values, v], dim=-2)
        return self.keys, self.values


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int) -> None:
        super().__init__()
        assert num_heads % num_kv_heads == 0
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.head_dim = d_model // num_heads
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.w_v = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.w_o = nn.Linear(d_model, d_model, bias=False)

    def share(self, t: torch.Tensor) -> torch.Tensor:
        """(B, H_kv, n, d) -> (B, H, n, d): kv head g serves query heads g·group .. (g+1)·group - 1."""
        B, H_kv, n, d = t.shape
        group = self.num_heads // H_kv
        return t[:, :, None].expand(B, H_kv, group, n, d).reshape(B, H_kv * group, n, d)

    def forward(self, x: torch.Tensor, cache: Optional[KVCache] = None) -> torch.Tensor:
        B, T, _ = x.shape
        q = self.w_q(x).unflatten(-1, (self.num_heads, self.head_dim)).transpose(1, 2)
        k = self.w_k(x).unflatten(-1, (self.num_kv_heads, self.head_dim)).transpose(1, 2)
        v = self.w_v(x).unflatten(-1, (self.num_kv_heads, self.head_dim)).transpose(1, 2)
        offset = len(cache) if cache is not None else 0
        if cache is not None:
            k, v = cache.update(k, v)
        k, v = self.share(k), self.share(v)
        n = k.shape[-2]
        future = torch.ones(T, n, dtype=torch.bool, device=x.device).triu(diagonal=offset + 1)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        weights = F.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        return self.w_o((weights @ v).transpose(1, 2).flatten(2))
