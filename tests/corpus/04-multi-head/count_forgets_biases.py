# Counts the weight matrices only.
# expect: partial
# hint: leaves out the biases
# %% cell: mha_parameter_count
def mha_parameter_count(embed_dim, num_heads, bias=True):
    return 4 * embed_dim * embed_dim
