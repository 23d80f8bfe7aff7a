# Builds num_layers copies but loops over range(num_layers - 1).
# expect: partial
# hint: num_layers - 1
# %% cell: encoder
class Encoder(nn.Module):
    def __init__(self, layer, num_layers):
        super().__init__()
        self.num_layers = num_layers
        self.layers = nn.ModuleList([copy.deepcopy(layer) for _ in range(num_layers)])

    def forward(self, src, mask=None, src_key_padding_mask=None):
        for i in range(self.num_layers - 1):
            src = self.layers[i](src, src_mask=mask, src_key_padding_mask=src_key_padding_mask)
        return src
