# Always counts the biases, even with bias=False.
# expect: partial
# hint: With bias=False there are no biases
# %% cell: mha_parameter_count
def mha_parameter_count(embed_dim, num_heads, bias=True):
    return 4 * embed_dim * embed_dim + 4 * embed_dim
