# A helper for "add & norm" that always uses the same LayerNorm: one module for three roles.
# expect: partial
# hint: You use norm3 for all three sublayers
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
        self.drop = nn.Dropout(dropout)

    def add_norm(self, x, y):
        return self.norm3(x + self.drop(y))

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None):
        x = self.add_norm(tgt, self.self_attn(tgt, tgt, tgt, attn_mask=tgt_mask,
                                               key_padding_mask=tgt_key_padding_mask)[0])
        x = self.add_norm(x, self.multihead_attn(x, memory, memory, attn_mask=memory_mask,
                                                 key_padding_mask=memory_key_padding_mask)[0])
        return self.add_norm(x, self.linear2(self.drop(torch.relu(self.linear1(x)))))
