# Post-norm blocks, as the Transformer of 2017 has them: the residual sum is normalised.
# expect: partial
# hint: post-norm
# %% cell: gpt
class Block(nn.Module):
    def __init__(self, d_model, num_heads, positions="rope"):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, num_heads, positions)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x, cache=None):
        x = self.norm1(x + self.attn(x, cache))
        return self.norm2(x + self.mlp(x))
