# Correct: one helper method for 'add & norm', norms and dropouts kept in ModuleLists
# would break the names, so they are set with setattr in a loop.
# expect: full
# %% cell: decoder_layer
class DecoderLayer(nn.Module):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.multihead_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        for i in (1, 2, 3):
            setattr(self, f"norm{i}", nn.LayerNorm(d_model))
            setattr(self, f"dropout{i}", nn.Dropout(dropout))
        self.dropout = nn.Dropout(dropout)

    def _add_norm(self, i, x, sub):
        return getattr(self, f"norm{i}")(x + getattr(self, f"dropout{i}")(sub))

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None):
        x = self._add_norm(1, tgt, self.self_attn(tgt, tgt, tgt, key_padding_mask=tgt_key_padding_mask,
                                                  attn_mask=tgt_mask, need_weights=False)[0])
        x = self._add_norm(2, x, self.multihead_attn(x, memory, memory, memory_key_padding_mask,
                                                     need_weights=False, attn_mask=memory_mask)[0])
        return self._add_norm(3, x, self.linear2(self.dropout(F.relu(self.linear1(x)))))
