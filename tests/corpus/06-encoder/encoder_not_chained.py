# Gives src to every layer instead of the previous layer's output.
# expect: partial
# hint: previous layer's output
# %% cell: encoder
class Encoder(nn.Module):
    def __init__(self, layer, num_layers):
        super().__init__()
        self.layers = nn.ModuleList([copy.deepcopy(layer) for _ in range(num_layers)])

    def forward(self, src, mask=None, src_key_padding_mask=None):
        for layer in self.layers:
            output = layer(src, src_mask=mask, src_key_padding_mask=src_key_padding_mask)
        return output
