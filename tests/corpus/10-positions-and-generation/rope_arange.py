# Ignores the positions argument: always 0..L-1.
# expect: partial
# hint: whatever the positions
# %% cell: apply_rope
def apply_rope(x, positions, base=10000.0):
    L, D = x.shape[-2], x.shape[-1]
    half = D // 2
    pos = torch.arange(L, device=x.device, dtype=x.dtype)
    angle = pos[:, None] * base ** (-2 * torch.arange(half, device=x.device, dtype=x.dtype) / D)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * angle.cos() - x2 * angle.sin(), x1 * angle.sin() + x2 * angle.cos()], dim=-1)
