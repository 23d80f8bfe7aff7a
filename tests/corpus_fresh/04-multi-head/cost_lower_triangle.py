# Counts only the pairs j <= i (n(n+1)/2), as if the attention were causal.
# expect: partial
# graded: mha_multiply_adds
# locus: n²·d|every pair|all pairs|triangle|causal
# %% cell: mha_multiply_adds
def mha_multiply_adds(n, d, num_heads):
    pairs = n * (n + 1) // 2
    return 4 * n * d * d + 2 * pairs * d
