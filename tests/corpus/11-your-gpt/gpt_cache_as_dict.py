# Correct: the cache is a dict from block index to KVCache, and the blocks run in a while loop.
# expect: full
# %% cell: gpt
class GPT(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_layers, positions="rope"):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList([Block(d_model, num_heads, positions) for _ in range(num_layers)])
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)

    def new_cache(self):
        return {i: KVCache() for i in range(len(self.blocks))}

    def forward(self, tokens, cache=None):
        h = self.embed(tokens)
        i = 0
        while i < len(self.blocks):
            h = self.blocks[i](h, cache[i] if cache is not None else None)
            i += 1
        return self.head(self.norm(h))
