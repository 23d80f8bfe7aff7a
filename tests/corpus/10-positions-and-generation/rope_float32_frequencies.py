# The frequencies in float32 (.float()), as much published code has them: float64 inputs lose precision.
# expect: partial
# hint: to float32 precision only
# %% cell: apply_rope
def apply_rope(x, positions, base=10000.0):
    half = x.shape[-1] // 2
    inv_freq = 1.0 / (base ** (torch.arange(0, x.shape[-1], 2, device=x.device).float() / x.shape[-1]))
    angle = (positions.float()[:, None] * inv_freq).to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * angle.cos() - x2 * angle.sin(), x1 * angle.sin() + x2 * angle.cos()], dim=-1)
