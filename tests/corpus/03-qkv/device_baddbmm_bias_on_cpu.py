# Right values, but the scores start from a zero bias made with torch.zeros(...) and no device=,
# added by torch.baddbmm: on a GPU (inputs on cuda) baddbmm crashes. PyTorch's meta kernel of
# baddbmm does not check its operands' devices; the grader's meta run checks every operator's.
# expect: partial
# hint: On a GPU this crashes
# %% cell: scaled_dot_product_attention
def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    L, S, d = query.size(-2), key.size(-2), query.size(-1)
    if scale is None:
        scale = 1 / math.sqrt(d)
    q, k = query.reshape(-1, L, d), key.reshape(-1, S, d)  # (N, L, d), (N, S, d)
    bias = torch.zeros(q.size(0), L, S, dtype=query.dtype)  # (N, L, S)
    scores = torch.baddbmm(bias, q, k.transpose(-2, -1), alpha=scale).reshape(*query.shape[:-1], S)
    if is_causal:
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool, device=query.device).tril(), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    weights = scores.softmax(dim=-1)
    return weights @ value, weights
