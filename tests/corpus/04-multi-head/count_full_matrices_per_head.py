# Gives every head its own embed_dim × embed_dim projections.
# expect: partial
# hint: grows with num_heads
# %% cell: mha_parameter_count
def mha_parameter_count(embed_dim, num_heads, bias=True):
    per_head = 3 * embed_dim * embed_dim + (3 * embed_dim if bias else 0)
    return num_heads * per_head + embed_dim * embed_dim + (embed_dim if bias else 0)
