# Correct: the layer norm is written as MyLayerNorm and bound with LayerNorm = MyLayerNorm; its
# forward keeps the normalised values in a local named layer_norm. (Before issue 11: 0 for
# LayerNorm, "calls nn.LayerNorm".)
# expect: full
# %% cell: layer_norm
class MyLayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps = shape, eps
        self.weight = nn.Parameter(torch.ones(shape))
        self.bias = nn.Parameter(torch.zeros(shape))

    def forward(self, x):
        dims = [-(i + 1) for i in range(len(self.normalized_shape))]  # the last dims
        var, mean = torch.var_mean(x, dim=dims, unbiased=False, keepdim=True)  # (..., 1)
        layer_norm = (x - mean) * torch.rsqrt(var + self.eps)  # (..., *normalized_shape)
        return layer_norm * self.weight + self.bias


LayerNorm = MyLayerNorm
