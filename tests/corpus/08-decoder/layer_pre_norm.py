# A pre-norm layer, as GPT-2: x + Sublayer(LayerNorm(x)).
# expect: partial
# hint: pre-norm
# also: first loss, before any update, already differs
# %% cell: decoder_layer
class DecoderLayer(nn.Module):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.multihead_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None):
        h = self.norm1(tgt)
        x = tgt + self.self_attn(h, h, h, attn_mask=tgt_mask, key_padding_mask=tgt_key_padding_mask)[0]
        x = x + self.multihead_attn(self.norm2(x), memory, memory, attn_mask=memory_mask,
                                    key_padding_mask=memory_key_padding_mask)[0]
        return x + self.linear2(torch.relu(self.linear1(self.norm3(x))))
