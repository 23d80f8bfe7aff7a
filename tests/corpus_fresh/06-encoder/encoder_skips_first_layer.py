# Loops over range(1, num_layers): the first layer is skipped.
# expect: partial
# graded: Encoder
# locus: first layer|num_layers - 1|self.layers[0]|one layer too few|layers[1:]
# %% cell: encoder
class Encoder(nn.Module):
    """A stack of num_layers encoder layers, as nn.TransformerEncoder (without a final norm).

    src: (B, L, E); mask: (L, L) bool; src_key_padding_mask: (B, L) bool (True = not allowed)
    returns (B, L, E)
    """

    def __init__(self, layer, num_layers):
        super().__init__()
        self.layers = nn.ModuleList([copy.deepcopy(layer) for _ in range(num_layers)])
        self.num_layers = num_layers

    def forward(self, src, mask=None, src_key_padding_mask=None):
        output = src  # (B, L, E)
        for layer in self.layers[1:]:
            output = layer(output, src_mask=mask, src_key_padding_mask=src_key_padding_mask)
        return output
