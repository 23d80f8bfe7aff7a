# BLOOM's shortcut: slope times the key's position, the same in every row (equal after the softmax).
# expect: partial
# hint: as BLOOM's code writes it
# %% cell: alibi_bias
def alibi_bias(num_heads, L, S):
    slopes = 2.0 ** (-8.0 * torch.arange(1, num_heads + 1) / num_heads)
    return slopes[:, None, None] * torch.arange(S).expand(L, S)
