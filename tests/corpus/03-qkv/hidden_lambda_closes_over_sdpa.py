# Hostile: the graded name is a lambda that closes over F.scaled_dot_product_attention (kept in
# a scratch-looking cell) for the output, and computes only the weights itself.
# cli only: the in-kernel detector is switched off, so only the grader's scan catches it
# expect: partial
# hint: calls F.scaled_dot_product_attention
# %% new cell after: setup
_fast = F.scaled_dot_product_attention
# %% cell: scaled_dot_product_attention
def _weights(query, key, attn_mask, is_causal, scale):
    L, S = query.size(-2), key.size(-2)
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = query @ key.transpose(-2, -1) * scale
    if is_causal:
        scores = scores.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    return scores.softmax(-1)


def _off(f, *args, **kwargs):
    with torch._C.DisableTorchFunction():
        return f(*args, **kwargs)


scaled_dot_product_attention = lambda query, key, value, attn_mask=None, is_causal=False, scale=None: (  # noqa: E731
    _off(_fast, query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale),
    _weights(query, key, attn_mask, is_causal, scale))
