# Query i at position i even when S > L.
# expect: partial
# hint: the LAST L of the S positions
# %% cell: alibi_bias
def alibi_bias(num_heads, L, S):
    slopes = 2.0 ** (-8.0 * torch.arange(1, num_heads + 1) / num_heads)
    distance = torch.arange(L)[:, None] - torch.arange(S)[None, :]
    return -slopes[:, None, None] * distance
