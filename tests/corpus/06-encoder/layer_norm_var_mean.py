# A correct LayerNorm with torch.var_mean (correction=0), rsqrt and torch.Size, that prints
# its statistics while it works.
# expect: full
# %% cell: layer_norm
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        shape = torch.Size([normalized_shape] if isinstance(normalized_shape, int) else normalized_shape)
        self.shape, self.eps = shape, eps
        self.weight = nn.Parameter(torch.ones(shape))
        self.bias = nn.Parameter(torch.zeros(shape))

    def forward(self, x):
        dims = [-(k + 1) for k in range(len(self.shape))]
        var, mean = torch.var_mean(x, dim=dims, correction=0, keepdim=True)
        print("mean of the first token:", mean.flatten()[0].item())
        return torch.addcmul(self.bias, (x - mean) * torch.rsqrt(var + self.eps), self.weight)
