# Correct: heads split with unflatten and merged with flatten; MultiHeadAttention projects with
# einsum on the chunks of in_proj_weight, keeps its scale as a float attribute, takes F.softmax;
# the parameter count builds the student's own MultiHeadAttention and counts its parameters;
# the multiply-adds in closed form. Type hints and from __future__ import annotations. Full marks.
# expect: full
# %% cell: split_heads
from __future__ import annotations


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    return x.unflatten(-1, (num_heads, -1)).transpose(1, 2)  # (B, H, L, E/H)
# %% cell: merge_heads
from __future__ import annotations


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    return x.transpose(1, 2).flatten(start_dim=2)  # (B, L, H·D)
# %% cell: MultiHeadAttention
from __future__ import annotations

from typing import Optional


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int, bias: bool = True) -> None:
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim {embed_dim} is not a multiple of num_heads {num_heads}")
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.scaling = float(self.head_dim) ** -0.5
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        self.in_proj_bias = nn.Parameter(torch.empty(3 * embed_dim)) if bias else None
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        nn.init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            nn.init.zeros_(self.in_proj_bias)

    def _project(self, x: torch.Tensor, index: int) -> torch.Tensor:
        E = self.embed_dim
        out = torch.einsum("ble,fe->blf", x, self.in_proj_weight[index * E:(index + 1) * E])
        if self.in_proj_bias is not None:
            out = out + self.in_proj_bias[index * E:(index + 1) * E]
        return split_heads(out, self.num_heads)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                key_padding_mask: Optional[torch.Tensor] = None, attn_mask: Optional[torch.Tensor] = None,
                need_weights: bool = True, average_attn_weights: bool = True):
        assert key_padding_mask is None and attn_mask is None, "masks come in assignment 05"
        q, k, v = (self._project(t, i) for i, t in enumerate((query, key, value)))
        weights = F.softmax(torch.einsum("bhld,bhsd->bhls", q, k) * self.scaling, dim=-1)
        out = self.out_proj(merge_heads(torch.einsum("bhls,bhsd->bhld", weights, v)))
        if not need_weights:
            return out, None
        return out, (weights.mean(dim=1) if average_attn_weights else weights)
# %% cell: mha_parameter_count
def mha_parameter_count(embed_dim: int, num_heads: int, bias: bool = True) -> int:
    # my own module has nn.MultiheadAttention's layout: count what it holds
    return sum(p.numel() for p in MultiHeadAttention(embed_dim, num_heads, bias=bias).parameters())
# %% cell: mha_multiply_adds
def mha_multiply_adds(n: int, d: int, num_heads: int) -> int:
    return 4 * n * d * d + 2 * n * n * d  # the heads' widths add up to d
