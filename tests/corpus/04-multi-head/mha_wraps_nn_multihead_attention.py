# Wraps nn.MultiheadAttention, exposing its parameters under the
# right names: forbidden, so MultiHeadAttention earns no points (the rest does).
# expect: partial
# hint: Doing so earns no points
# %% cell: MultiHeadAttention
class MultiHeadAttention(nn.MultiheadAttention):
    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__(embed_dim, num_heads, bias=bias, batch_first=True)

    def forward(self, query, key, value, key_padding_mask=None, attn_mask=None,
                need_weights=True, average_attn_weights=True):
        return super().forward(query, key, value, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
                               need_weights=need_weights, average_attn_weights=average_attn_weights)
