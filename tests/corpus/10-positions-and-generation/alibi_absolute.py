# The symmetric distance |i - j| of bidirectional ALiBi.
# expect: partial
# hint: Your bias is -m·|i - j|
# %% cell: alibi_bias
def alibi_bias(num_heads, L, S):
    slopes = 2.0 ** (-8.0 * torch.arange(1, num_heads + 1) / num_heads)
    distance = ((torch.arange(L) + S - L)[:, None] - torch.arange(S)[None, :]).abs()
    return -slopes[:, None, None] * distance
