# A correct Encoder built from a generator of deep copies, with functools.reduce over the
# layers and a print of the depth.
# expect: full
# %% cell: encoder
import functools


class Encoder(nn.Module):
    def __init__(self, layer, num_layers):
        super().__init__()
        self.layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(num_layers))

    def forward(self, src, mask=None, src_key_padding_mask=None):
        print(f"encoding with {len(self.layers)} layers")
        step = lambda x, layer: layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask)
        return functools.reduce(step, self.layers, src)
