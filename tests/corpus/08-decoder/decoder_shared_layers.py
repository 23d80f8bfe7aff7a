# Repeats one layer instead of copying it: all layers share their weights.
# expect: partial
# hint: All your layers have the same weights
# %% cell: decoder
class Decoder(nn.Module):
    def __init__(self, layer, num_layers, norm=None):
        super().__init__()
        self.layers = nn.ModuleList([layer] * num_layers)
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None):
        for block in self.layers:
            tgt = block(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                        tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask)
        return tgt if self.norm is None else self.norm(tgt)
