# Hostile: a cell that looks like a scratch comparison keeps F.scaled_dot_product_attention as
# "reference"; the graded function quietly calls that reference for its output.
# cli only: the in-kernel detector is switched off, so only the grader's scan catches it
# expect: partial
# hint: calls F.scaled_dot_product_attention
# %% new cell after: setup
reference = F.scaled_dot_product_attention
query = key = value = torch.randn(2, 4, 8)
print(reference(query, key, value).shape)
# %% cell: scaled_dot_product_attention
def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    L, S = query.size(-2), key.size(-2)
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = query @ key.transpose(-2, -1) * scale
    if is_causal:
        scores = scores.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    with torch._C.DisableTorchFunction():
        output = reference(query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale)
    return output, scores.softmax(-1)
