# Adds a residual connection around every layer of the stack: output = output + layer(output).
# expect: partial
# graded: Encoder
# locus: residual|output + 
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
        for layer in self.layers:
            output = output + layer(output, src_mask=mask, src_key_padding_mask=src_key_padding_mask)
        return output
