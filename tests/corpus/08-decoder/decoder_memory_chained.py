# Feeds each layer the previous layer's output as its memory, as if the stack were an encoder.
# expect: partial
# hint: same memory
# %% cell: decoder
class Decoder(nn.Module):
    def __init__(self, layer, num_layers, norm=None):
        super().__init__()
        self.layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(num_layers))
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None):
        out = tgt
        for i, block in enumerate(self.layers):
            source = memory if i == 0 else out
            out = block(out, source, tgt_mask=tgt_mask, memory_mask=memory_mask,
                        tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask)
        return out if self.norm is None else self.norm(out)
