# Right values, but scales the caller's query in place (query.mul_): the student's own tensor
# changes under them. Issue 12 finding 9: inputs are compared with copies after each call.
# expect: partial
# hint: changes its input in place
# %% cell: scaled_dot_product_attention
def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    L, S = query.size(-2), key.size(-2)
    query.mul_(1 / math.sqrt(query.size(-1)) if scale is None else scale)  # saves a copy...
    scores = query @ key.transpose(-2, -1)
    if is_causal:
        causal = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    weights = scores.softmax(dim=-1)
    return weights @ value, weights
