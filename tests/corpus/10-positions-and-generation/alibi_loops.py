# Correct: two Python loops and the slopes one by one.
# expect: full
# %% cell: alibi_bias
def alibi_bias(num_heads, L, S):
    bias = torch.zeros(num_heads, L, S)
    for h in range(num_heads):
        slope = 2 ** (-8 * (h + 1) / num_heads)
        for i in range(L):
            for j in range(S):
                bias[h, i, j] = -slope * (i + S - L - j)
    return bias
