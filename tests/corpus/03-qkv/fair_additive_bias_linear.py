# Correct: projections through F.linear with the transposed weights; attention builds one
# additive bias (0 or -inf) from the causal and boolean masks with masked_fill_ in place, adds
# a float mask to it, and takes torch.softmax. A scratch cell compares with PyTorch. Full marks.
# expect: full
# %% cell: project_qkv
def project_qkv(x, w_q, w_k, w_v):
    return F.linear(x, w_q.t()), F.linear(x, w_k.t()), F.linear(x, w_v.t())
# %% cell: scaled_dot_product_attention
def attention_bias(L, S, attn_mask, is_causal, dtype, device):
    """An additive bias: 0 where a query may attend, -inf where it may not."""
    bias = torch.zeros(L, S, dtype=dtype, device=device)
    if is_causal:
        bias.masked_fill_(torch.ones(L, S, dtype=torch.bool, device=device).triu(1), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            bias = bias.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            bias = bias + attn_mask
    return bias


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    factor = scale if scale is not None else 1.0 / math.sqrt(query.size(-1))
    scores = torch.matmul(query, key.transpose(-2, -1)) * factor
    scores = scores + attention_bias(query.size(-2), key.size(-2), attn_mask, is_causal, scores.dtype, scores.device)
    weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights, value), weights
# %% new cell after: test_sdpa_masks
q, k, v = torch.randn(3, 2, 5, 4).unbind(0)
mask = torch.rand(5, 5) > 0.3
mask[:, 0] = True
ours, _ = scaled_dot_product_attention(q, k, v, attn_mask=mask)
print("same as PyTorch:", torch.allclose(ours, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-6))
