# Puts a causal mask on the cross-attention too, 'because the decoder must not see the future'.
# expect: partial
# hint: cross-attention has a causal mask
# also: If your Transformer fails its own test
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
        a = self.self_attn(tgt, tgt, tgt, attn_mask=tgt_mask, key_padding_mask=tgt_key_padding_mask)[0]
        x = self.norm1(tgt + self.dropout(a))
        c = self.multihead_attn(x, memory, memory, attn_mask=torch.ones(x.shape[1], memory.shape[1], dtype=torch.bool, device=x.device).triu(1), key_padding_mask=memory_key_padding_mask)[0]
        x = self.norm2(x + self.dropout(c))
        return self.norm3(x + self.dropout(self.linear2(self.dropout(torch.relu(self.linear1(x))))))
