# Computes the weights itself but takes the output from PyTorch's function, under an alias:
# forbidden, so scaled_dot_product_attention earns no points (project_qkv still does).
# expect: partial
# hint: Doing so earns no points
# %% cell: scaled_dot_product_attention
from torch.nn.functional import scaled_dot_product_attention as fused_attention


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    L, S = query.size(-2), key.size(-2)
    if scale is None:
        scale = 1 / math.sqrt(query.size(-1))
    scores = query @ key.transpose(-2, -1) * scale
    if is_causal:
        causal = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    output = fused_attention(query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale)
    return output, scores.softmax(dim=-1)
