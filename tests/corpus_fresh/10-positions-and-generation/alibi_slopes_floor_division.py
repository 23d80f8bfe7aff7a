# Writes the exponent with floor division (-8·h // H): the slopes jump in powers of 2.
# expect: partial
# graded: alibi_bias
# locus: floor|integer division|whole powers
# %% cell: alibi_bias
def alibi_bias(num_heads, L, S):
    """ALiBi's bias: (num_heads, L, S), bias[h, i, j] = -m_h * (i + S - L - j), m_h = 2^(-8 (h + 1) / H)."""
    m = torch.pow(2.0, (-8 * torch.arange(1, num_heads + 1) // num_heads).float())  # (H,): 2^(-8/H), ..., 2^(-8)
    q_idx = torch.arange(S - L, S)  # (L,): the queries are the last L positions
    k_idx = torch.arange(S)  # (S,)
    back = q_idx.unsqueeze(1) - k_idx.unsqueeze(0)  # (L, S): how far back each key is
    return -(m.view(-1, 1, 1) * back)  # (H, L, S), float32
