# Correct: the class is written as _Heads and bound to the graded name; its forward calls a
# helper of their own named multi_head_attention_forward (not F.'s), whose local variable
# attn_output_weights is named like PyTorch's. (Before issue 11: 0 for MultiHeadAttention.)
# expect: full
# %% cell: MultiHeadAttention
def multi_head_attention_forward(q, k, v, masks, num_heads, out_proj):
    """q: (B, L, E); k, v: (B, S, E) -> (B, L, E) and the per-head weights (B, H, L, S)."""
    q, k, v = (split_heads(t, num_heads) for t in (q, k, v))  # (B, H, *, E/H)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, L, S)
    for mask in masks:
        scores = scores.masked_fill(mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    attn_output_weights = scores.softmax(dim=-1)  # (B, H, L, S)
    return out_proj(merge_heads(attn_output_weights @ v)), attn_output_weights


class _Heads(nn.Module):
    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        self.num_heads = num_heads
        self.in_proj_weight = nn.Parameter(nn.init.xavier_uniform_(torch.empty(3 * embed_dim, embed_dim)))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim)) if bias else None
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(self, query, key, value, key_padding_mask=None, attn_mask=None,
                need_weights=True, average_attn_weights=True):
        B, L, _ = query.shape
        S, H = key.size(1), self.num_heads
        biases = (None,) * 3 if self.in_proj_bias is None else self.in_proj_bias.chunk(3)
        q, k, v = (F.linear(t, w, b) for t, w, b in zip((query, key, value), self.in_proj_weight.chunk(3), biases))
        masks = []
        if attn_mask is not None:
            masks.append(attn_mask.view(B, H, L, S) if attn_mask.dim() == 3 else attn_mask)
        if key_padding_mask is not None:
            masks.append(key_padding_mask.view(B, 1, 1, S))
        out, weights = multi_head_attention_forward(q, k, v, masks, H, self.out_proj)
        if not need_weights:
            return out, None
        return out, weights.mean(dim=1) if average_attn_weights else weights


MultiHeadAttention = _Heads
