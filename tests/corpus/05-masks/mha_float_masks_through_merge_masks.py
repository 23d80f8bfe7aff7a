# Follows part 5 for boolean masks (its own merge_masks, then masked_fill) but sends float masks the
# same way: one float mask reaches masked_fill, which raises (two raise earlier, in merge_masks's |).
# expect: partial
# hint: may be a float mask, as here
# %% cell: MultiHeadAttention
class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.in_proj_weight = nn.Parameter(nn.init.xavier_uniform_(torch.empty(3 * embed_dim, embed_dim)))
        if bias:
            self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(self, query, key, value, key_padding_mask=None, attn_mask=None,
                need_weights=True, average_attn_weights=True):
        B, L, E = query.shape
        S, H, D = key.size(1), self.num_heads, self.head_dim
        biases = (None,) * 3 if self.in_proj_bias is None else self.in_proj_bias.chunk(3)
        q, k, v = (F.linear(x, w, b).reshape(B, -1, H, D).transpose(1, 2)
                   for x, w, b in zip((query, key, value), self.in_proj_weight.chunk(3), biases))
        scores = q @ k.transpose(-2, -1) / D ** 0.5  # (B, H, L, S)
        if key_padding_mask is not None or attn_mask is not None:
            scores = scores.masked_fill(merge_masks(key_padding_mask, attn_mask, H), float("-inf"))
        weights = scores.softmax(-1)
        out = self.out_proj((weights @ v).transpose(1, 2).reshape(B, L, E))
        if not need_weights:
            return out, None
        return out, weights.mean(1) if average_attn_weights else weights
