# The return is indented into the loop: only the first layer runs and the final norm is never applied.
# expect: partial
# graded: Decoder
# locus: first layer|one layer|inside the loop|final norm
# %% cell: decoder
class Decoder(nn.Module):
    def __init__(self, layer, num_layers, norm=None):
        super().__init__()
        self.layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(num_layers))
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None):
        out = tgt
        for block in self.layers:
            out = block(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                        tgt_key_padding_mask=tgt_key_padding_mask,
                        memory_key_padding_mask=memory_key_padding_mask)
            if self.norm is not None:
                out = self.norm(out)
            return out
