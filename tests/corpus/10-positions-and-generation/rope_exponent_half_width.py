# The exponent divides by D/2, the number of pairs, instead of D: frequencies base^(-4i/D).
# expect: partial
# hint: base^(-4i/D)
# %% cell: apply_rope
def apply_rope(x, positions, base=10000.0):
    half = x.shape[-1] // 2
    theta = base ** (-2 * torch.arange(half, device=x.device, dtype=x.dtype) / half)
    angle = positions.to(x.dtype)[:, None] * theta
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * angle.cos() - x2 * angle.sin(), x1 * angle.sin() + x2 * angle.cos()], dim=-1)
