# Correct: indexes the layers, and keeps the final norm as an identity when there is none.
# expect: full
# %% cell: decoder
class Decoder(nn.Module):
    def __init__(self, layer, num_layers, norm=None):
        super().__init__()
        self.layers = nn.ModuleList([copy.deepcopy(layer) for i in range(num_layers)])
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None):
        for i in range(len(self.layers)):
            tgt = self.layers[i](tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask)
        finish = self.norm if self.norm is not None else nn.Identity()
        return finish(tgt)
