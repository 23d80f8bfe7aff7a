# The slopes 1/2, 1/4, 1/8, ... whatever the number of heads (the paper's list for 8 heads).
# expect: partial
# hint: do not depend on the number of heads
# %% cell: alibi_bias
def alibi_bias(num_heads, L, S):
    slopes = torch.tensor([0.5 ** (h + 1) for h in range(num_heads)])
    i = torch.arange(S - L, S)[:, None]
    j = torch.arange(S)[None, :]
    return -slopes[:, None, None] * (i - j)
