# Swaps cos and sin in the rotation: x1' = x1·sin - x2·cos, x2' = x1·cos + x2·sin.
# expect: partial
# graded: apply_rope
# locus: cos and sin|sin and cos|swapped|cos with sin
# %% cell: apply_rope
def apply_rope(x, positions, base=10000.0):
    """Rotate feature pairs (i, i + D/2) of every row by the angle position * base^(-2i/D).

    x: (..., L, D), D even; positions: (L,) integers; returns (..., L, D), like x
    """
    d = x.size(-1)
    freq = base ** (-2 * torch.arange(d // 2, device=x.device, dtype=x.dtype) / d)  # (D/2,): one per pair
    ang = torch.outer(positions.to(x.dtype), freq)  # (L, D/2): broadcasts over the leading dimensions
    c, s = torch.cos(ang), torch.sin(ang)
    a, b = x.split(d // 2, dim=-1)  # (..., L, D/2) each: pair i is (a[i], b[i])
    return torch.cat((a * s - b * c, a * c + b * s), dim=-1)  # (..., L, D)
