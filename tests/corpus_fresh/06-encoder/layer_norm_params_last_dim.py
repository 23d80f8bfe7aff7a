# Gives weight and bias the last dim's size only: wrong for a normalized_shape of several dims.
# expect: partial
# graded: LayerNorm
# locus: normalized_shape|weight and bias|shape of weight|2 dims
# %% cell: layer_norm
class LayerNorm(nn.Module):
    """Layer normalisation over the last len(normalized_shape) dims, as nn.LayerNorm.

    x: (..., *normalized_shape) -> same shape
    """

    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(self.normalized_shape[-1]))  # gamma
        self.bias = nn.Parameter(torch.zeros(self.normalized_shape[-1]))  # beta

    def forward(self, x):
        dims = tuple(range(-len(self.normalized_shape), 0))  # the last dims, e.g. (-1,)
        mean = x.mean(dim=dims, keepdim=True)  # (..., 1): one mean per token
        var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)  # biased variance, per token
        x_hat = (x - mean) / torch.sqrt(var + self.eps)  # (..., *normalized_shape)
        return x_hat * self.weight + self.bias
