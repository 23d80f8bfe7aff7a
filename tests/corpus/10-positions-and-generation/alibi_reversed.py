# The smallest slope first: the heads in the wrong order.
# expect: partial
# hint: round the heads the wrong way
# %% cell: alibi_bias
def alibi_bias(num_heads, L, S):
    slopes = 2.0 ** (-8.0 * torch.arange(num_heads, 0, -1) / num_heads)
    distance = (torch.arange(L) + S - L)[:, None] - torch.arange(S)[None, :]
    return -slopes[:, None, None] * distance
