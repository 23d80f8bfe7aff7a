# Builds the angles as outer(freq, positions), (D/2, L), and transposes only when needed to broadcast.
# expect: partial
# graded: apply_rope
# locus: outer|(L, D/2)|(D/2, L)|angle table|positions × frequencies
# %% cell: apply_rope
def apply_rope(x, positions, base=10000.0):
    """Rotate feature pairs (i, i + D/2) of every row by the angle position * base^(-2i/D).

    x: (..., L, D), D even; positions: (L,) integers; returns (..., L, D), like x
    """
    d = x.size(-1)
    freq = base ** (-2 * torch.arange(d // 2, device=x.device, dtype=x.dtype) / d)  # (D/2,): one per pair
    ang = torch.outer(freq, positions.to(x.dtype)).reshape(-1, d // 2)  # (L, D/2): broadcasts over the leading dimensions
    c, s = torch.cos(ang), torch.sin(ang)
    a, b = x.split(d // 2, dim=-1)  # (..., L, D/2) each: pair i is (a[i], b[i])
    return torch.cat((a * c - b * s, a * s + b * c), dim=-1)  # (..., L, D)
