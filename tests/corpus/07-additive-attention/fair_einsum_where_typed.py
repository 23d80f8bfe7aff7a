# Correct, typed: AdditiveAttention with broadcasting, einsum against v's weight row and
# torch.where for the padding; LSTMAttentionPooling with einsum for every head at once,
# masked_fill and F.softmax, its settings checked with asserts. Full marks.
# expect: full
# %% cell: additive_attention
from __future__ import annotations

from typing import Optional, Tuple


class AdditiveAttention(nn.Module):
    def __init__(self, query_size: int, key_size: int, hidden_size: int) -> None:
        super().__init__()
        self.w_q = nn.Linear(query_size, hidden_size, bias=False)
        self.w_k = nn.Linear(key_size, hidden_size, bias=False)
        self.v = nn.Linear(hidden_size, 1, bias=False)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                key_padding_mask: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        features = torch.tanh(self.w_q(query)[:, :, None, :] + self.w_k(key)[:, None, :, :])  # (B, L, S, h)
        scores = torch.einsum("blsh,h->bls", features, self.v.weight[0])
        if key_padding_mask is not None:
            scores = torch.where(key_padding_mask[:, None, :], torch.full_like(scores, -math.inf), scores)
        weights = F.softmax(scores, dim=-1)
        return torch.einsum("bls,bsd->bld", weights, value), weights
# %% cell: lstm_attention_pooling
from __future__ import annotations


class LSTMAttentionPooling(nn.Module):
    def __init__(self, hidden_size: int, num_heads: int = 1, score: str = "dot") -> None:
        super().__init__()
        assert hidden_size % num_heads == 0, "hidden_size must be a multiple of num_heads"
        assert score in {"dot", "additive"}, f"unknown score {score!r}"
        self.num_heads, self.score = num_heads, score
        self.head_dim = hidden_size // num_heads
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(hidden_size, hidden_size, bias=False) for _ in range(4))
        if score == "additive":
            self.v = nn.Parameter(torch.randn(num_heads, self.head_dim) * self.head_dim**-0.5)

    def forward(self, outputs: torch.Tensor, h_n: torch.Tensor, key_padding_mask: torch.Tensor | None = None):
        B, D, E = outputs.shape
        H, d = self.num_heads, self.head_dim
        q = self.w_q(h_n[-1]).reshape(B, H, d)
        k = self.w_k(outputs).reshape(B, D, H, d)
        v = self.w_v(outputs).reshape(B, D, H, d)
        if self.score == "dot":
            scores = torch.einsum("bhd,bthd->bht", q, k) / math.sqrt(d)
        else:
            scores = torch.einsum("bthd,hd->bht", torch.tanh(q[:, None] + k), self.v)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, :], -math.inf)
        weights = F.softmax(scores, dim=-1)  # (B, H, D)
        pooled = torch.einsum("bht,bthd->bhd", weights, v).reshape(B, E)
        return self.w_o(pooled), weights
