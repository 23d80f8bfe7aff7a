# Passes src_mask as key_padding_mask and src_key_padding_mask as attn_mask.
# expect: partial
# graded: EncoderLayer
# locus: swapped|key_padding_mask|attn_mask|src_mask
# %% cell: encoder_layer
class EncoderLayer(nn.Module):
    """One post-norm Transformer encoder layer, as nn.TransformerEncoderLayer(batch_first=True).

    src: (B, L, E); src_mask: (L, L) bool; src_key_padding_mask: (B, L) bool (True = not allowed)
    returns (B, L, E)
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1):
        super().__init__()
        # nn.TransformerEncoderLayer's names, so that its state_dict loads
        self.self_attn = nn.MultiheadAttention(embed_dim=d_model, num_heads=nhead, dropout=dropout, batch_first=True)
        # the feed-forward network: d_model -> dim_feedforward -> d_model
        self.linear1, self.linear2 = nn.Linear(d_model, dim_feedforward), nn.Linear(dim_feedforward, d_model)
        self.norm1, self.norm2 = (nn.LayerNorm(d_model) for _ in range(2))
        # dropout inside the feed-forward network, and on each sublayer's output
        self.dropout, self.dropout1, self.dropout2 = (nn.Dropout(p=dropout) for _ in range(3))

    def forward(self, src, src_mask=None, src_key_padding_mask=None):
        # sublayer 1: multi-head self-attention, residual, LayerNorm
        attn, _ = self.self_attn(src, src, src, attn_mask=src_key_padding_mask,
                                 key_padding_mask=src_mask, need_weights=False)  # (B, L, E)
        h = self.norm1(src + self.dropout1(attn))  # (B, L, E)
        # sublayer 2: feed-forward network, residual, LayerNorm
        ff = self.linear2(self.dropout(torch.relu(self.linear1(h))))  # (B, L, E)
        return self.norm2(h + self.dropout2(ff))
