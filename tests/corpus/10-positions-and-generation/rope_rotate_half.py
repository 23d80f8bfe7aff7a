# Correct: the Hugging Face way, cos and sin repeated over both halves and rotate_half(x) = (-x2, x1).
# expect: full
# %% cell: apply_rope
def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x, positions, base=10000.0):
    dim = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=x.dtype, device=x.device) / dim))
    freqs = positions[:, None].to(x.dtype) * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)  # (L, D)
    return x * emb.cos() + rotate_half(x) * emb.sin()
