# Takes the mean and variance without keepdim: they broadcast against the wrong axis.
# expect: partial
# graded: LayerNorm
# locus: keepdim
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
        self.weight = nn.Parameter(torch.ones(self.normalized_shape))  # gamma
        self.bias = nn.Parameter(torch.zeros(self.normalized_shape))  # beta

    def forward(self, x):
        dims = tuple(range(-len(self.normalized_shape), 0))  # the last dims, e.g. (-1,)
        mean = x.mean(dim=dims)  # (..., 1): one mean per token
        var = x.var(dim=dims, unbiased=False)  # biased variance, per token
        x_hat = (x - mean) / torch.sqrt(var + self.eps)  # (..., *normalized_shape)
        return x_hat * self.weight + self.bias
