# Repeats one layer instead of copying it: every position of the ModuleList is the same
# module, so all layers end up with the same weights.
# expect: partial
# hint: All your layers have the same weights
# %% cell: encoder
class Encoder(nn.Module):
    def __init__(self, layer, num_layers):
        super().__init__()
        self.layers = nn.ModuleList([layer] * num_layers)

    def forward(self, src, mask=None, src_key_padding_mask=None):
        for layer in self.layers:
            src = layer(src, src_mask=mask, src_key_padding_mask=src_key_padding_mask)
        return src
