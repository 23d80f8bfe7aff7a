# Adds the self-attention's output to tgt in place (tgt += ...): the caller's tgt changes.
# expect: partial
# graded: DecoderLayer
# locus: in place|in-place|inplace
# %% cell: decoder_layer
class DecoderLayer(nn.Module):
    """One post-norm Transformer decoder layer, as nn.TransformerDecoderLayer(batch_first=True).

    tgt: (B, T, E); memory: (B, S, E); tgt_mask: (T, T) bool; memory_mask: (T, S) bool;
    tgt_key_padding_mask: (B, T) bool; memory_key_padding_mask: (B, S) bool (True = not allowed)
    returns (B, T, E)
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1):
        super().__init__()
        attention = lambda: nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.self_attn = attention()  # queries, keys, values: the target
        self.multihead_attn = attention()  # queries: the target; keys, values: the memory
        # the feed-forward network: d_model -> dim_feedforward -> d_model
        self.linear1, self.linear2 = nn.Linear(d_model, dim_feedforward), nn.Linear(dim_feedforward, d_model)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.dropout, self.dropout1, self.dropout2, self.dropout3 = (nn.Dropout(dropout) for _ in range(4))

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None):
        # 1. masked self-attention over the target: causal mask and the target's padding
        sa, _ = self.self_attn(tgt, tgt, tgt, attn_mask=tgt_mask, key_padding_mask=tgt_key_padding_mask,
                               need_weights=False)  # (B, T, E)
        tgt += self.dropout1(sa)
        x = self.norm1(tgt)
        # 2. cross-attention: queries from the target, keys and values from the source's memory
        ca, _ = self.multihead_attn(x, memory, memory, attn_mask=memory_mask,
                                    key_padding_mask=memory_key_padding_mask, need_weights=False)  # (B, T, E)
        x = self.norm2(x + self.dropout2(ca))
        # 3. position-wise feed-forward network
        hidden = self.dropout(torch.relu(self.linear1(x)))  # (B, T, dim_feedforward)
        return self.norm3(x + self.dropout3(self.linear2(hidden)))
