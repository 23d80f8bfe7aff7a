# Passes mask to the layers but forgets src_key_padding_mask.
# expect: partial
# hint: does not pass src_key_padding_mask
# %% cell: encoder
class Encoder(nn.Module):
    def __init__(self, layer, num_layers):
        super().__init__()
        self.layers = nn.ModuleList([copy.deepcopy(layer) for _ in range(num_layers)])

    def forward(self, src, mask=None, src_key_padding_mask=None):
        for layer in self.layers:
            src = layer(src, mask)
        return src
