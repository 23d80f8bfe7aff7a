# Calls PyTorch's attention.
# expect: partial
# hint: which this exercise asks you to write yourself
# %% cell: flash_attention
def flash_attention(q, k, v, block_size, causal=False):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
