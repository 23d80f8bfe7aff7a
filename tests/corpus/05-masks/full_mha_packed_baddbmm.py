# A correct MultiHeadAttention in PyTorch's own style, pasted from notebook 04 with its helpers:
# one packed projection when query, key and value are the same tensor, heads folded into the batch
# as (B·H, L, E/H), both masks (boolean or float, (L, S) or (B·H, L, S)) turned into one additive
# (B·H, L, S) mask and applied with torch.baddbmm, weights averaged with a sum.
# expect: full
# %% cell: MultiHeadAttention
def split_heads(x, num_heads):
    B, L, E = x.shape
    return x.unflatten(-1, (num_heads, E // num_heads)).swapaxes(1, 2)


def merge_heads(x):
    B, H, L, D = x.shape
    return x.swapaxes(1, 2).contiguous().view(B, L, H * D)


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.in_proj_weight = nn.Parameter(nn.init.xavier_uniform_(torch.empty(3 * embed_dim, embed_dim)))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim)) if bias else None
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(self, query, key, value, key_padding_mask=None, attn_mask=None,
                need_weights=True, average_attn_weights=True):
        B, L, E = query.shape
        S, H = key.size(1), self.num_heads
        if query is key and key is value:
            q, k, v = F.linear(query, self.in_proj_weight, self.in_proj_bias).chunk(3, dim=-1)
        else:
            ws = self.in_proj_weight.split(E)
            bs = self.in_proj_bias.split(E) if self.in_proj_bias is not None else (None, None, None)
            q, k, v = (F.linear(x, w, b) for x, w, b in zip((query, key, value), ws, bs))
        q = split_heads(q, H).reshape(B * H, L, E // H)
        k = split_heads(k, H).reshape(B * H, S, E // H)
        v = split_heads(v, H).reshape(B * H, S, E // H)
        mask = torch.zeros(B * H, L, S, dtype=query.dtype, device=query.device)
        for m in (attn_mask, None if key_padding_mask is None else
                  key_padding_mask[:, None, None, :].expand(B, H, 1, S).reshape(B * H, 1, S)):
            if m is not None:
                mask = mask.masked_fill(m, float("-inf")) if m.dtype == torch.bool else mask + m
        weights = torch.baddbmm(mask, q * (E // H) ** -0.5, k.transpose(1, 2)).softmax(dim=-1)  # (B·H, L, S)
        out = self.out_proj(merge_heads(torch.bmm(weights, v).view(B, H, L, E // H)))
        weights = weights.view(B, H, L, S)
        if average_attn_weights:
            weights = weights.sum(dim=1) / H
        return out, weights if need_weights else None
