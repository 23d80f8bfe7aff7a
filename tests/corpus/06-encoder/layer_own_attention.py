# A correct EncoderLayer with a hand-written multi-head attention (chapter 04's parameters:
# in_proj_weight, in_proj_bias, out_proj), the notebook's own LayerNorm, boolean masks applied
# with masked_fill, and dropout modules.
# expect: full
# %% cell: encoder_layer
class SelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim))
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        nn.init.xavier_uniform_(self.in_proj_weight)

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        B, L, E = x.shape
        H = self.num_heads
        q, k, v = F.linear(x, self.in_proj_weight, self.in_proj_bias).chunk(3, dim=-1)
        q, k, v = (t.reshape(B, L, H, E // H).transpose(1, 2) for t in (q, k, v))  # (B, H, L, E/H)
        scores = q @ k.transpose(-2, -1) / math.sqrt(E // H)  # (B, H, L, L)
        if attn_mask is not None:
            scores = scores.masked_fill(attn_mask, float("-inf"))
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, L, E)
        return self.out_proj(out)


class EncoderLayer(nn.Module):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1):
        super().__init__()
        self.self_attn = SelfAttention(d_model, nhead)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.drop = nn.ModuleList([nn.Dropout(dropout) for _ in range(3)])

    def forward(self, src, src_mask=None, src_key_padding_mask=None):
        x = self.norm1(src + self.drop[0](self.self_attn(src, src_mask, src_key_padding_mask)))
        ff = self.linear2(self.drop[1](torch.relu(self.linear1(x))))
        return self.norm2(x + self.drop[2](ff))
