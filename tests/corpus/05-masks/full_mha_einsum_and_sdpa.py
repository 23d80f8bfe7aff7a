# A correct MultiHeadAttention built from einsum and PyTorch's fused attention, pasted from
# notebook 04 with the merge_heads it calls: the heads are cut from the weights, both masks become
# one additive float mask as nn.MultiheadAttention builds it, F.scaled_dot_product_attention gives
# the output (allowed) and einsum the weights.
# expect: full
# %% cell: MultiHeadAttention
def merge_heads(x):
    return torch.cat(x.unbind(dim=1), dim=-1)


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        self.num_heads = num_heads
        self.in_proj_weight = nn.Parameter(torch.randn(3 * embed_dim, embed_dim) / embed_dim**0.5)
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim)) if bias else None
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(self, query, key, value, key_padding_mask=None, attn_mask=None,
                need_weights=True, average_attn_weights=True):
        B, L, E = query.shape
        S, H = key.shape[1], self.num_heads
        w = self.in_proj_weight.unflatten(0, (3, H, E // H))  # (3, H, E/H, E)
        q = torch.einsum("ble,hde->bhld", query, w[0])
        k = torch.einsum("bse,hde->bhsd", key, w[1])
        v = torch.einsum("bse,hde->bhsd", value, w[2])
        if self.in_proj_bias is not None:
            b = self.in_proj_bias.unflatten(0, (3, H, 1, E // H))
            q, k, v = q + b[0], k + b[1], v + b[2]

        def additive(mask):
            if mask.dtype == torch.bool:
                return torch.zeros(mask.shape, dtype=query.dtype, device=query.device).masked_fill(mask, float("-inf"))
            return mask

        extra = torch.zeros(B, H, L, S, dtype=query.dtype, device=query.device)
        if attn_mask is not None:
            extra = extra + (additive(attn_mask).reshape(B, H, L, S) if attn_mask.dim() == 3 else additive(attn_mask))
        if key_padding_mask is not None:
            extra = extra + additive(key_padding_mask)[:, None, None, :]
        heads = F.scaled_dot_product_attention(q, k, v, attn_mask=extra)
        out = self.out_proj(merge_heads(heads))
        if not need_weights:
            return out, None
        weights = torch.softmax(torch.einsum("bhld,bhsd->bhls", q, k) / math.sqrt(E // H) + extra, dim=-1)
        return out, weights.mean(1) if average_attn_weights else weights
