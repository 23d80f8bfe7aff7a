# Counts each head's scores at the full width d (the mixing at d/h).
# expect: partial
# graded: mha_multiply_adds
# locus: n²·d/h|d/h|head_dim|full width|per head
# %% cell: mha_multiply_adds
def mha_multiply_adds(n, d, num_heads):
    head_dim = d // num_heads
    scores = num_heads * n * d * n
    mixing = num_heads * n * n * head_dim
    return 4 * n * d * d + scores + mixing
