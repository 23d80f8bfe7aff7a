# Counts in_proj_weight and in_proj_bias only.
# expect: partial
# hint: leaves out the output projection
# %% cell: mha_parameter_count
def mha_parameter_count(embed_dim, num_heads, bias=True):
    return 3 * embed_dim * embed_dim + (3 * embed_dim if bias else 0)
