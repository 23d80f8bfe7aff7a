# Counts two input projections (queries and keys) and forgets W_v.
# expect: partial
# graded: mha_parameter_count
# locus: W_v|three projections|in_proj_weight|3·embed_dim|values' projection
# %% cell: mha_parameter_count
def mha_parameter_count(embed_dim, num_heads, bias=True):
    weights = 2 * embed_dim * embed_dim + embed_dim * embed_dim
    biases = 2 * embed_dim + embed_dim if bias else 0
    return weights + biases
