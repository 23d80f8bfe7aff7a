# The head shares the embedding's weight (weight tying, as GPT-2 does): one matrix fewer than the contract.
# expect: partial
# hint: weight tying
# also: more slowly than the contract's
# %% cell: gpt
class GPT(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_layers, positions="rope"):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList(Block(d_model, num_heads, positions) for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.head.weight = self.embed.weight

    def new_cache(self):
        return [KVCache() for _ in self.blocks]

    def forward(self, tokens, cache=None):
        x = self.embed(tokens)
        for i, block in enumerate(self.blocks):
            x = block(x, None if cache is None else cache[i])
        return self.head(self.norm(x))
