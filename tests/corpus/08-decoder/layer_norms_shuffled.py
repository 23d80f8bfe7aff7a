# Names the norms after the order in which they were defined, but calls them as "attention
# norm, feed-forward norm, cross norm": norm1, norm3, norm2.
# expect: partial
# hint: LayerNorms are in the wrong order
# also: If your Transformer fails its own test
# %% cell: decoder_layer
class DecoderLayer(nn.Module):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.multihead_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model)  # after self-attention
        self.norm2 = nn.LayerNorm(d_model)  # after the feed-forward network
        self.norm3 = nn.LayerNorm(d_model)  # after cross-attention
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None):
        sa, _ = self.self_attn(tgt, tgt, tgt, attn_mask=tgt_mask, key_padding_mask=tgt_key_padding_mask)
        x = self.norm1(tgt + self.dropout1(sa))
        ca, _ = self.multihead_attn(x, memory, memory, attn_mask=memory_mask,
                                    key_padding_mask=memory_key_padding_mask)
        x = self.norm3(x + self.dropout2(ca))
        ff = self.linear2(torch.relu(self.linear1(x)))
        return self.norm2(x + self.dropout3(ff))
