# The rotation matrix transposed: rotates by -p·θ.
# expect: partial
# hint: You rotate the other way
# %% cell: apply_rope
def apply_rope(x, positions, base=10000.0):
    half = x.shape[-1] // 2
    theta = base ** (-2 * torch.arange(half, device=x.device, dtype=x.dtype) / x.shape[-1])
    cos = torch.cos(positions.to(x.dtype)[:, None] * theta)
    sin = torch.sin(positions.to(x.dtype)[:, None] * theta)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos + x2 * sin, -x1 * sin + x2 * cos], dim=-1)
