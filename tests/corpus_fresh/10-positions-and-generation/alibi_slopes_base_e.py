# Computes the slopes as exp(-8(h+1)/H) instead of 2^(-8(h+1)/H).
# expect: partial
# graded: alibi_bias
# locus: base 2|powers of 2|exp(|base e
# %% cell: alibi_bias
def alibi_bias(num_heads, L, S):
    """ALiBi's bias: (num_heads, L, S), bias[h, i, j] = -m_h * (i + S - L - j), m_h = 2^(-8 (h + 1) / H)."""
    m = torch.exp(-8.0 * torch.arange(1, num_heads + 1) / num_heads)  # (H,): 2^(-8/H), ..., 2^(-8)
    q_idx = torch.arange(S - L, S)  # (L,): the queries are the last L positions
    k_idx = torch.arange(S)  # (S,)
    back = q_idx.unsqueeze(1) - k_idx.unsqueeze(0)  # (L, S): how far back each key is
    return -(m.view(-1, 1, 1) * back)  # (H, L, S), float32
