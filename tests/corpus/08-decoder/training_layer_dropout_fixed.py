# The decoder layer's dropout is a fixed 0.1 (F.dropout with training=self.training, so eval
# mode is right), not the dropout it was given.
# expect: partial
# hint: first loss, before any update, already differs
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

    def drop(self, x):
        return F.dropout(x, 0.1, training=self.training)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None):
        x = self.norm1(tgt + self.drop(self.self_attn(tgt, tgt, tgt, attn_mask=tgt_mask,
                                                      key_padding_mask=tgt_key_padding_mask)[0]))
        x = self.norm2(x + self.drop(self.multihead_attn(x, memory, memory, attn_mask=memory_mask,
                                                         key_padding_mask=memory_key_padding_mask)[0]))
        return self.norm3(x + self.drop(self.linear2(self.drop(torch.relu(self.linear1(x))))))
