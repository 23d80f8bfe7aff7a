# Gives the output projection one bias per head.
# expect: partial
# graded: mha_parameter_count
# locus: out_proj.bias|per head|num_heads
# %% cell: mha_parameter_count
def mha_parameter_count(embed_dim, num_heads, bias=True):
    weights = 4 * embed_dim * embed_dim
    biases = 3 * embed_dim + num_heads * embed_dim if bias else 0
    return weights + biases
