# Adds a residual connection around every layer of the stack.
# expect: partial
# graded: Decoder
# locus: residual|out + 
# %% cell: decoder
class Decoder(nn.Module):
    """A stack of num_layers decoder layers and an optional final norm, as nn.TransformerDecoder.

    tgt: (B, T, E); memory: (B, S, E); masks as in DecoderLayer; returns (B, T, E)
    """

    def __init__(self, layer, num_layers, norm=None):
        super().__init__()
        self.layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(num_layers))
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None):
        out = tgt  # (B, T, E)
        for block in self.layers:  # the target flows through the layers; the memory is the same for all
            out = out + block(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                        tgt_key_padding_mask=tgt_key_padding_mask,
                        memory_key_padding_mask=memory_key_padding_mask)
        if self.norm is not None:
            out = self.norm(out)
        return out
