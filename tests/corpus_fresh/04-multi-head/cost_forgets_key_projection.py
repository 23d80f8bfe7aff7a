# Counts two projections of n·d² (queries, values) and forgets the keys'.
# expect: partial
# graded: mha_multiply_adds
# locus: Q, K, V|3·n·d²|projections|key projection
# %% cell: mha_multiply_adds
def mha_multiply_adds(n, d, num_heads):
    head_dim = d // num_heads
    projections = 2 * n * d * d
    scores = num_heads * n * head_dim * n
    mixing = num_heads * n * n * head_dim
    return projections + scores + mixing + n * d * d
