# A correct Encoder that appends deep copies to an empty nn.ModuleList, calls the layers with
# positional arguments and indexes them in a while loop.
# expect: full
# %% cell: encoder
class Encoder(nn.Module):
    def __init__(self, layer, num_layers):
        super().__init__()
        self.layers = nn.ModuleList()
        for _ in range(num_layers):
            self.layers.append(copy.deepcopy(layer))

    def forward(self, src, mask=None, src_key_padding_mask=None):
        i, x = 0, src
        while i < len(self.layers):
            x = self.layers[i](x, mask, src_key_padding_mask)
            i += 1
        return x
