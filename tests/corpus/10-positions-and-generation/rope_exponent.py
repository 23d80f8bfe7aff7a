# Frequencies base^(-i/D): the factor 2 of the exponent is missing.
# expect: partial
# hint: Your frequencies are base^(-i/D)
# %% cell: apply_rope
def apply_rope(x, positions, base=10000.0):
    half = x.shape[-1] // 2
    theta = base ** (-torch.arange(half, device=x.device, dtype=x.dtype) / x.shape[-1])
    angle = positions.to(x.dtype)[:, None] * theta
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * angle.cos() - x2 * angle.sin(), x1 * angle.sin() + x2 * angle.cos()], dim=-1)
