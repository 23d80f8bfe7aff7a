# Subclasses nn.TransformerEncoderLayer: forbidden, so EncoderLayer earns no points.
# expect: partial
# hint: Doing so earns no points
# %% cell: encoder_layer
class EncoderLayer(nn.TransformerEncoderLayer):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1):
        super().__init__(d_model, nhead, dim_feedforward, dropout, batch_first=True)

    def forward(self, src, src_mask=None, src_key_padding_mask=None):
        return super().forward(src, src_mask=src_mask, src_key_padding_mask=src_key_padding_mask)
