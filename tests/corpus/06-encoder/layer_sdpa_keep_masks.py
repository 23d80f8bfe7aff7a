# Uses F.scaled_dot_product_attention with the boolean masks as they come: for that function
# True means "may attend", so the masks act inverted (nn.MultiheadAttention: True = not allowed).
# expect: partial
# hint: inverted: True marks
# %% cell: encoder_layer
class EncoderLayer(nn.Module):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def attend(self, x, src_mask, src_key_padding_mask):
        B, L, E = x.shape
        H = self.self_attn.num_heads
        qkv = F.linear(x, self.self_attn.in_proj_weight, self.self_attn.in_proj_bias)
        q, k, v = (t.view(B, L, H, E // H).transpose(1, 2) for t in qkv.chunk(3, dim=-1))
        keep = None
        if src_mask is not None:
            keep = src_mask
        if src_key_padding_mask is not None:
            pad = src_key_padding_mask[:, None, None, :]
            keep = pad if keep is None else keep & pad
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        return self.self_attn.out_proj(out.transpose(1, 2).reshape(B, L, E))

    def forward(self, src, src_mask=None, src_key_padding_mask=None):
        h = self.norm1(src + self.attend(src, src_mask, src_key_padding_mask))
        return self.norm2(h + self.linear2(self.dropout(torch.relu(self.linear1(h)))))
