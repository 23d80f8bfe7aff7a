# Correct; scratch cells compare with F.scaled_dot_product_attention for every is_causal, keep
# PyTorch's function under a name of their own (reference), and a copy of a test cell follows.
# expect: full
# %% new cell after: scaled_dot_product_attention
reference = F.scaled_dot_product_attention
for is_causal in (False, True):
    query, key, value = torch.randn(3, 2, 4, 8).unbind(0)
    mine, _ = scaled_dot_product_attention(query, key, value, is_causal=is_causal)
    print(is_causal, torch.allclose(mine, reference(query, key, value, is_causal=is_causal), atol=1e-6))
# %% copy of: test_sdpa_basic after: test_sdpa_masks
# %% cell: project_qkv
def project_qkv(x, w_q, w_k, w_v):
    q, k, v = (torch.matmul(x, w) for w in (w_q, w_k, w_v))  # (..., L, d_k), (..., L, d_k), (..., L, d_v)
    return q, k, v
