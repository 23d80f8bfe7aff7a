# apply_rope pasted with the interleaved pairs (2i, 2i+1) of the original paper's code, not the halves.
# expect: partial
# hint: pairs features (2i, 2i + 1)
# %% cell: parts
def apply_rope(x, positions, base=10000.0):
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, device=x.device, dtype=x.dtype) / d)
    angle = positions.to(x.dtype)[:, None] * theta
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.stack([x1 * angle.cos() - x2 * angle.sin(), x1 * angle.sin() + x2 * angle.cos()], dim=-1)
    return out.flatten(-2)
