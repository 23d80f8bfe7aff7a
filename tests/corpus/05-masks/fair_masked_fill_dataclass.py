# Correct: padding from the difference with pad_id, the causal mask from triu of ones cast to
# bool, merge_masks with reshape and a boolean "+" avoided (|=, in place on a copy);
# masked_attention adds a -inf bias made with masked_fill; MultiHeadAttention keeps its sizes
# in a dataclass of its own, uses einsum and merge_masks, and checks its inputs with asserts.
# A scratch cell plots the causal mask. Full marks.
# expect: full
# %% cell: padding_mask
def padding_mask(tokens, pad_id=0):
    return (tokens - pad_id) == 0
# %% cell: causal_mask
def causal_mask(size):
    return torch.triu(torch.ones(size, size), diagonal=1).bool()
# %% cell: merge_masks
def merge_masks(key_padding_mask, attn_mask, num_heads):
    merged = None
    if attn_mask is not None:
        merged = attn_mask.reshape(-1, num_heads, *attn_mask.shape[-2:]) if attn_mask.ndim == 3 else attn_mask
        merged = merged.clone()
    if key_padding_mask is not None:
        padding = key_padding_mask.unsqueeze(1).unsqueeze(1)  # (B, 1, 1, S)
        if merged is None:
            return padding
        merged = merged | padding
    return merged
# %% cell: masked_attention
def masked_attention(query, key, value, key_padding_mask=None, attn_mask=None):
    scores = query @ key.transpose(-2, -1) * query.size(-1) ** -0.5
    bias = torch.zeros_like(scores)
    if key_padding_mask is not None:
        shape = [key_padding_mask.size(0)] + [1] * (scores.dim() - 2) + [key_padding_mask.size(1)]
        bias = bias.masked_fill(key_padding_mask.view(shape), float("-inf"))
    if attn_mask is not None:
        bias = bias.masked_fill(attn_mask, float("-inf"))
    weights = (scores + bias).softmax(dim=-1)
    return weights @ value, weights
# %% cell: MultiHeadAttention
from dataclasses import dataclass


@dataclass
class Sizes:
    batch: int
    heads: int
    queries: int
    keys: int
    head_dim: int


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        assert embed_dim % num_heads == 0
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        nn.init.xavier_uniform_(self.in_proj_weight)
        if bias:
            self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(self, query, key, value, key_padding_mask=None, attn_mask=None, need_weights=True,
                average_attn_weights=True):
        assert query.dim() == 3 and key.shape == value.shape
        n = Sizes(query.size(0), self.num_heads, query.size(1), key.size(1), self.embed_dim // self.num_heads)
        w = self.in_proj_weight.view(3, self.embed_dim, self.embed_dim)
        q = torch.einsum("ble,fe->blf", query, w[0])
        k = torch.einsum("ble,fe->blf", key, w[1])
        v = torch.einsum("ble,fe->blf", value, w[2])
        if self.in_proj_bias is not None:
            b_q, b_k, b_v = self.in_proj_bias.view(3, self.embed_dim)
            q, k, v = q + b_q, k + b_k, v + b_v
        q = q.view(n.batch, n.queries, n.heads, n.head_dim).permute(0, 2, 1, 3)
        k = k.view(n.batch, n.keys, n.heads, n.head_dim).permute(0, 2, 1, 3)
        v = v.view(n.batch, n.keys, n.heads, n.head_dim).permute(0, 2, 1, 3)
        scores = torch.einsum("bhld,bhsd->bhls", q, k) / math.sqrt(n.head_dim)
        masks = [m for m in (key_padding_mask, attn_mask) if m is not None]
        if masks and masks[0].dtype == torch.bool:
            scores = scores.masked_fill(merge_masks(key_padding_mask, attn_mask, n.heads), float("-inf"))
        else:
            if key_padding_mask is not None:
                scores = scores + key_padding_mask[:, None, None, :]
            if attn_mask is not None:
                scores = scores + attn_mask.reshape(-1, n.heads, n.queries, n.keys) if attn_mask.dim() == 3 \
                    else scores + attn_mask
        weights = torch.softmax(scores, dim=-1)
        heads = torch.einsum("bhls,bhsd->blhd", weights, v).reshape(n.batch, n.queries, self.embed_dim)
        out = self.out_proj(heads)
        if not need_weights:
            return out, None
        return out, weights.mean(dim=1) if average_attn_weights else weights
# %% new cell after: test_causal_mask
import matplotlib.pyplot as plt

plt.matshow(causal_mask(6).int())
plt.title("True: may not attend")
plt.show()
