# alibi_bias pasted with the slopes in the wrong order: head 0 the gentlest.
# expect: partial
# hint: head 0 the gentlest slope
# %% cell: parts
def alibi_bias(num_heads, L, S):
    m = torch.pow(2.0, -8.0 * torch.arange(num_heads, 0, -1) / num_heads)
    back = torch.arange(S - L, S).unsqueeze(1) - torch.arange(S).unsqueeze(0)
    return -(m.view(-1, 1, 1) * back)
