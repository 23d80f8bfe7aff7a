# Hostile: a class attribute holds nn.LayerNorm; the instance is kept out of the module tree
# (object.__setattr__) and its forward called directly with torch function handling off, so
# neither the module watch nor the call detector in the kernel sees it.
# cli only: the in-kernel detectors are bypassed, so only the grader's scan catches it
# expect: partial
# hint: calls nn.LayerNorm
# %% cell: layer_norm
class LayerNorm(nn.Module):
    kind = nn.LayerNorm

    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        inner = self.kind(normalized_shape, eps=eps)
        self.normalized_shape, self.eps = inner.normalized_shape, eps
        self.weight, self.bias = inner.weight, inner.bias
        object.__setattr__(self, "_inner", inner)

    def forward(self, x):
        with torch._C.DisableTorchFunction():
            return self._inner.forward(x)
