# The source text's version: deep copies kept in a Python list, which PyTorch does not see
# (no parameters, no .to(), no state dict).
# expect: partial
# hint: Python list
# %% cell: encoder
class Encoder(nn.Module):
    def __init__(self, layer, num_layers):
        super().__init__()
        self.layers = [copy.deepcopy(layer) for _ in range(num_layers)]

    def forward(self, src, mask=None, src_key_padding_mask=None):
        for layer in self.layers:
            src = layer(src, src_mask=mask, src_key_padding_mask=src_key_padding_mask)
        return src
