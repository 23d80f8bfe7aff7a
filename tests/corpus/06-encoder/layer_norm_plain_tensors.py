# Keeps gamma and beta as plain tensors (not nn.Parameter): right on a new module, but the
# weights cannot be loaded.
# expect: partial
# hint: weights must be nn.Parameter
# %% cell: layer_norm
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.dims = tuple(range(-len(normalized_shape), 0))
        self.eps = eps
        self.weight = torch.ones(normalized_shape)
        self.bias = torch.zeros(normalized_shape)

    def forward(self, x):
        mean = x.mean(self.dims, keepdim=True)
        var = x.var(self.dims, keepdim=True, unbiased=False)
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight.to(x) + self.bias.to(x)
