# Passes only tgt and memory to the layers.
# expect: partial
# hint: get no masks
# also: first loss, before any update, already differs
# %% cell: decoder
class Decoder(nn.Module):
    def __init__(self, layer, num_layers, norm=None):
        super().__init__()
        self.layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(num_layers))
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None):
        for block in self.layers:
            tgt = block(tgt, memory)
        return tgt if self.norm is None else self.norm(tgt)
