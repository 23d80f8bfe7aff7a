# A correct LayerNorm that flattens the normalised dims, computes in float64 with the
# parameters registered by register_parameter, and casts back to the input's dtype.
# expect: full
# %% cell: layer_norm
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = [normalized_shape]
        self.normalized_shape = list(normalized_shape)
        self.eps = eps
        self.register_parameter("weight", nn.Parameter(torch.ones(*self.normalized_shape)))
        self.register_parameter("bias", nn.Parameter(torch.zeros(*self.normalized_shape)))

    def forward(self, x):
        k = len(self.normalized_shape)
        flat = x.double().reshape(*x.shape[:x.dim() - k], -1)  # (..., n)
        centred = flat - flat.sum(-1, keepdim=True) / flat.shape[-1]
        var = (centred * centred).sum(-1, keepdim=True) / flat.shape[-1]
        y = (centred / (var + self.eps).sqrt()).reshape(x.shape)
        return (y * self.weight.double() + self.bias.double()).to(x.dtype)
