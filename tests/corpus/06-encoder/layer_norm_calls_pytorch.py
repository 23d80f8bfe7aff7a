# Calls F.layer_norm through an alias: forbidden, so LayerNorm earns no points (the rest does).
# expect: partial
# hint: Doing so earns no points
# %% cell: layer_norm
from torch.nn.functional import layer_norm as normalise


class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(self.normalized_shape))
        self.bias = nn.Parameter(torch.zeros(self.normalized_shape))

    def forward(self, x):
        return normalise(x, self.normalized_shape, self.weight, self.bias, self.eps)
