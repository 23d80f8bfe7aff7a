# Subclasses nn.TransformerEncoder: forbidden, so Encoder earns no points.
# expect: partial
# hint: Doing so earns no points
# %% cell: encoder
class Encoder(nn.TransformerEncoder):
    def __init__(self, layer, num_layers):
        super().__init__(layer, num_layers, enable_nested_tensor=False)

    def forward(self, src, mask=None, src_key_padding_mask=None):
        for layer in self.layers:
            src = layer(src, src_mask=mask, src_key_padding_mask=src_key_padding_mask)
        return src
