# Applies dropout with F.dropout's default training=True: the output is random in eval mode.
# expect: partial
# hint: dropout must be off in eval mode
# %% cell: encoder_layer
class EncoderLayer(nn.Module):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1):
        super().__init__()
        self.p = dropout
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, src, src_mask=None, src_key_padding_mask=None):
        attn, _ = self.self_attn(src, src, src, attn_mask=src_mask, key_padding_mask=src_key_padding_mask)
        h = self.norm1(src + F.dropout(attn, self.p))
        ff = self.linear2(F.dropout(torch.relu(self.linear1(h)), self.p))
        return self.norm2(h + F.dropout(ff, self.p))
