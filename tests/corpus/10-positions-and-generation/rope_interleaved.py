# The RoFormer paper's pairs (2i, 2i+1) where the contract says halves (i, i + D/2).
# expect: partial
# hint: You rotate neighbouring pairs
# %% cell: apply_rope
def apply_rope(x, positions, base=10000.0):
    D = x.shape[-1]
    theta = base ** (-torch.arange(0, D, 2, device=x.device, dtype=x.dtype) / D)
    angle = positions.to(x.dtype)[:, None] * theta
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.stack([x1 * angle.cos() - x2 * angle.sin(), x1 * angle.sin() + x2 * angle.cos()], dim=-1)
    return out.flatten(-2)
