# Normalises the stack's output with a LayerNorm that nn.TransformerEncoder (norm=None) does not have.
# expect: partial
# graded: Encoder
# locus: final norm|extra norm|layer_norm|no final|norm=none|final layernorm
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
            output = layer(output, src_mask=mask, src_key_padding_mask=src_key_padding_mask)
        return F.layer_norm(output, output.shape[-1:])
