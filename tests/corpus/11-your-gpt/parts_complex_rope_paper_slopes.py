# Correct: RoPE as a complex multiplication, and the ALiBi slopes as the paper's get_slopes computes them,
# pasted from assignment 10.
# expect: full
# %% cell: parts
def apply_rope(x, positions, base=10000.0):
    half = x.shape[-1] // 2
    exponents = torch.arange(0, x.shape[-1], 2, device=x.device, dtype=x.dtype) / x.shape[-1]
    angles = torch.outer(positions.to(x.dtype), base ** -exponents)  # (L, D/2)
    z = torch.complex(x[..., :half], x[..., half:]) * torch.polar(torch.ones_like(angles), angles)
    return torch.cat([z.real, z.imag], dim=-1)


def get_slopes(n):
    start = 2 ** (-2 ** -(math.log2(n) - 3))
    return [start * start ** i for i in range(n)]


def alibi_bias(num_heads, L, S):
    slopes = torch.tensor(get_slopes(num_heads))
    rel = torch.arange(S)[None, :] - torch.arange(S - L, S)[:, None]  # j - p_i, (L, S)
    return slopes.view(-1, 1, 1) * rel
