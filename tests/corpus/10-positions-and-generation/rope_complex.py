# Correct: each pair (x1, x2) as the complex number x1 + i·x2, multiplied by exp(i·p·θ).
# expect: full
# %% cell: apply_rope
def apply_rope(x, positions, base=10000.0):
    half = x.shape[-1] // 2
    exponents = torch.arange(0, x.shape[-1], 2, device=x.device, dtype=x.dtype) / x.shape[-1]
    angles = torch.outer(positions.to(x.dtype), base ** -exponents)  # (L, D/2)
    z = torch.complex(x[..., :half], x[..., half:]) * torch.polar(torch.ones_like(angles), angles)
    return torch.cat([z.real, z.imag], dim=-1)
