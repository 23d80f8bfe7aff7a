# Counts in_proj_bias but not out_proj.bias.
# expect: partial
# graded: mha_parameter_count
# locus: out_proj.bias|out_proj's bias|output projection's bias|biases
# %% cell: mha_parameter_count
def mha_parameter_count(embed_dim, num_heads, bias=True):
    weights = 4 * embed_dim * embed_dim
    return weights + (3 * embed_dim if bias else 0)
