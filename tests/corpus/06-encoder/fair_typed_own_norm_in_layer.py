# Correct, typed (from __future__ import annotations, Union, Sequence): LayerNorm with nn.init,
# var(correction=0) and rsqrt, computing half precision in float32; the positional encoding as
# the Annotated Transformer writes it (exp of a log, sin and cos stacked and interleaved);
# FeedForward with clamp_min as its ReLU; EncoderLayer with the student's own LayerNorm as
# norm1 and norm2 and its dropouts in an nn.ModuleList; Encoder built with map and a lambda.
# Full marks.
# expect: full
# %% cell: layer_norm
from __future__ import annotations

from typing import Sequence, Union


class LayerNorm(nn.Module):
    def __init__(self, normalized_shape: Union[int, Sequence[int]], eps: float = 1e-5) -> None:
        super().__init__()
        shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
        self.normalized_shape = tuple(shape)
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(self.normalized_shape))
        self.bias = nn.Parameter(torch.empty(self.normalized_shape))
        nn.init.ones_(self.weight)
        nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dims = [-i for i in range(1, len(self.normalized_shape) + 1)]
        work = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        mean = work.mean(dim=dims, keepdim=True)
        var = work.var(dim=dims, keepdim=True, correction=0)
        normalised = (work - mean) * torch.rsqrt(var + self.eps)
        return (normalised * self.weight + self.bias).to(x.dtype)
# %% cell: positional_encoding
from __future__ import annotations


def positional_encoding(max_len: int, d_model: int) -> torch.Tensor:
    assert d_model % 2 == 0, "d_model must be even"
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    angles = position * div_term  # (max_len, d_model/2)
    return torch.stack((angles.sin(), angles.cos()), dim=-1).reshape(max_len, d_model)
# %% cell: feed_forward
from __future__ import annotations


class FeedForward(nn.Module):
    def __init__(self, d_model: int, dim_feedforward: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.dropout(self.linear1(x).clamp_min(0.0)))
# %% cell: encoder_layer
from __future__ import annotations

from typing import Optional


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1) -> None:
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = LayerNorm(d_model)  # my own, from above: same parameter names as nn.LayerNorm
        self.norm2 = LayerNorm(d_model)
        self.dropouts = nn.ModuleList([nn.Dropout(dropout) for _ in range(3)])

    def forward(self, src: torch.Tensor, src_mask: Optional[torch.Tensor] = None,
                src_key_padding_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        inner, after_attention, after_ff = self.dropouts
        attended = self.self_attn(src, src, src, attn_mask=src_mask, key_padding_mask=src_key_padding_mask,
                                  need_weights=False)[0]
        x = self.norm1(src + after_attention(attended))
        ff = self.linear2(inner(F.relu(self.linear1(x))))
        return self.norm2(x + after_ff(ff))
# %% cell: encoder
from __future__ import annotations


class Encoder(nn.Module):
    def __init__(self, layer: nn.Module, num_layers: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(map(lambda _: copy.deepcopy(layer), range(num_layers)))
        self.num_layers = num_layers

    def forward(self, src: torch.Tensor, mask=None, src_key_padding_mask=None) -> torch.Tensor:
        for index, layer in enumerate(self.layers):
            src = layer(src, src_mask=mask, src_key_padding_mask=src_key_padding_mask)
        return src
