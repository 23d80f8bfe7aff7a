# Hostile: forward uses functools.partial(F.layer_norm, ...) kept in a module-level dict that a
# later cell fills in, with torch function handling off.
# cli only: the in-kernel detector is switched off, so only the grader's scan catches it
# expect: partial
# hint: calls F.layer_norm
# %% new cell after: setup
import functools

_kernels = {}
_kernels["norm"] = functools.partial(F.layer_norm)
# %% cell: layer_norm
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps = shape, eps
        self.weight = nn.Parameter(torch.ones(shape))
        self.bias = nn.Parameter(torch.zeros(shape))

    def forward(self, x):
        with torch._C.DisableTorchFunction():
            return _kernels["norm"](x, self.normalized_shape, self.weight, self.bias, self.eps)
