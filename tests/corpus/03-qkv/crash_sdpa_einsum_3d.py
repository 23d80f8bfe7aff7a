# Writes the scores with einsum subscripts for (B, L, E) inputs: crashes on (B, H, L, E) and on
# unbatched-heads inputs with more leading dims, which the docstring allows ((..., L, E)).
# expect: partial
# hint: subscripts name 3 dimensions
# %% cell: scaled_dot_product_attention
def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    L, S = query.size(-2), key.size(-2)
    if scale is None:
        scale = 1 / math.sqrt(query.size(-1))
    scores = torch.einsum("bld,bsd->bls", query, key) * scale
    if is_causal:
        causal = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    weights = scores.softmax(dim=-1)
    return torch.einsum("bls,bsd->bld", weights, value), weights
