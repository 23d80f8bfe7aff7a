# Counts the output projection as embed_dim x head_dim, one head's width, instead of embed_dim x embed_dim.
# expect: partial
# graded: mha_parameter_count
# locus: out_proj|output projection|embed_dim × embed_dim
# %% cell: mha_parameter_count
def mha_parameter_count(embed_dim, num_heads, bias=True):
    head_dim = embed_dim // num_heads
    weights = 3 * embed_dim * embed_dim + embed_dim * head_dim
    biases = 4 * embed_dim if bias else 0
    return weights + biases
