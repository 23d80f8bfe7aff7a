# Correct: functools.reduce over the layers, masks passed as a dict.
# expect: full
# %% cell: decoder
class Decoder(nn.Module):
    def __init__(self, layer, num_layers, norm=None):
        super().__init__()
        self.layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(num_layers))
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None):
        import functools
        masks = dict(tgt_mask=tgt_mask, memory_mask=memory_mask, tgt_key_padding_mask=tgt_key_padding_mask,
                     memory_key_padding_mask=memory_key_padding_mask)
        out = functools.reduce(lambda h, block: block(h, memory, **masks), self.layers, tgt)
        return out if self.norm is None else self.norm(out)
