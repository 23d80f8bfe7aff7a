# Counts a multiplication and an addition separately (FLOPs, not multiply-adds).
# expect: partial
# hint: counts once
# %% cell: mha_multiply_adds
def mha_multiply_adds(n, d, num_heads):
    """Multiply-adds of the matrix products of multi-head self-attention over n tokens of width d."""
    head_dim = d // num_heads
    projections = 3 * n * d * d  # Q, K, V: (n × d)(d × d) each
    scores = num_heads * n * head_dim * n  # Q_i K_iᵀ: (n × d/h)(d/h × n) per head
    mixing = num_heads * n * n * head_dim  # weights_i V_i: (n × n)(n × d/h) per head
    output = n * d * d  # Concat(heads) W_O: (n × d)(d × d)
    return 2 * (projections + scores + mixing + output)
