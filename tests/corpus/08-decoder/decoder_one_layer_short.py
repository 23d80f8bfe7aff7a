# range(num_layers - 1): one layer too few.
# expect: partial
# hint: one layer too few
# also: first loss, before any update, already differs
# %% cell: decoder
class Decoder(nn.Module):
    def __init__(self, layer, num_layers, norm=None):
        super().__init__()
        self.layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(num_layers))
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None):
        for i in range(len(self.layers) - 1):
            tgt = self.layers[i](tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                                 tgt_key_padding_mask=tgt_key_padding_mask,
                                 memory_key_padding_mask=memory_key_padding_mask)
        return tgt if self.norm is None else self.norm(tgt)
