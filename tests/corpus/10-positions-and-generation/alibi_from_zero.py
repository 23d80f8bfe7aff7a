# Heads counted from 0 in the exponent: head 0 gets slope 1.
# expect: partial
# hint: Your first head has slope 1
# %% cell: alibi_bias
def alibi_bias(num_heads, L, S):
    slopes = 2.0 ** (-8.0 * torch.arange(num_heads) / num_heads)
    distance = (torch.arange(L) + S - L)[:, None] - torch.arange(S)[None, :]
    return -slopes[:, None, None] * distance
