# Correct: scaled_dot_product_attention is a functools.partial of their own _attention (which
# never calls F.scaled_dot_product_attention), fixing the fill value of masked scores.
# (Before issue 11: "calls F.scaled_dot_product_attention", 0 of 9.)
# expect: full
# %% cell: scaled_dot_product_attention
import functools


def _attention(query, key, value, attn_mask=None, is_causal=False, scale=None, *, masked_value):
    L, S = query.size(-2), key.size(-2)
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = query @ key.transpose(-2, -1) * scale  # (..., L, S)
    if is_causal:
        scores = scores.masked_fill(torch.ones(L, S, dtype=torch.bool, device=query.device).triu(1), masked_value)
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, masked_value) if attn_mask.dtype == torch.bool else scores + attn_mask
    weights = torch.softmax(scores, dim=-1)  # (..., L, S)
    return weights @ value, weights


scaled_dot_product_attention = functools.partial(_attention, masked_value=float("-inf"))
