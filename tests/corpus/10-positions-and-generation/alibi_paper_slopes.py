# Correct: the slopes as the paper's get_slopes computes them (start = ratio = 2^(-8/H)), broadcasting.
# expect: full
# %% cell: alibi_bias
def get_slopes(n):
    start = 2 ** (-2 ** -(math.log2(n) - 3))
    return [start * start ** i for i in range(n)]


def alibi_bias(num_heads, L, S):
    slopes = torch.tensor(get_slopes(num_heads))
    rel = torch.arange(S)[None, :] - torch.arange(S - L, S)[:, None]  # j - p_i, (L, S)
    return slopes.view(-1, 1, 1) * rel
