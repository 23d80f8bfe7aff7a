# Counts the output projection at one head's width, (n x d)(d x d/h), instead of (n x d)(d x d).
# expect: partial
# graded: mha_multiply_adds
# locus: output projection|(n × d)(d × d)|concat
# %% cell: mha_multiply_adds
def mha_multiply_adds(n, d, num_heads):
    head_dim = d // num_heads
    projections = 3 * n * d * d
    attention = 2 * num_heads * n * n * head_dim
    return projections + attention + n * d * head_dim
