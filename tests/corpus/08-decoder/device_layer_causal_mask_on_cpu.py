# Right values, but turns the boolean tgt_mask into a float one with torch.zeros(T, T, ...) and no
# device=: on a GPU every case with a target mask crashes (a CPU tensor filled where a cuda mask is True).
# expect: partial
# hint: On a GPU this crashes
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
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None):
        T = tgt.shape[1]
        if tgt_mask is not None:
            tgt_mask = torch.zeros(T, T, dtype=tgt.dtype).masked_fill(tgt_mask, float("-inf"))  # -inf: hidden
        sa = self.self_attn(tgt, tgt, tgt, attn_mask=tgt_mask, key_padding_mask=tgt_key_padding_mask,
                            need_weights=False)[0]
        x = self.norm1(tgt + self.dropout1(sa))
        ca = self.multihead_attn(x, memory, memory, attn_mask=memory_mask,
                                 key_padding_mask=memory_key_padding_mask, need_weights=False)[0]
        x = self.norm2(x + self.dropout2(ca))
        return self.norm3(x + self.dropout3(self.linear2(self.dropout(torch.relu(self.linear1(x))))))
