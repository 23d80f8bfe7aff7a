# Scales the scores by sqrt(S), the number of keys, instead of sqrt(E).
# expect: partial
# graded: masked_attention
# locus: number of keys|sqrt(S)|query.size(-1)|sqrt(E)|size(-2)
# %% cell: masked_attention
def masked_attention(query, key, value, key_padding_mask=None, attn_mask=None):
    """softmax(query @ keyᵀ / sqrt(E), masked) @ value, with nn.MultiheadAttention's boolean masks.

    query: (B, [H,] L, E); key: (B, [H,] S, E); value: (B, [H,] S, Ev)
    key_padding_mask: None or (B, S) bool, True at padding
    attn_mask: None or (L, S) bool, True = not allowed
    returns (output, weights): (B, [H,] L, Ev), (B, [H,] L, S); masked weights are exactly 0
    """
    scores = query @ key.transpose(-2, -1) / math.sqrt(key.size(-2))  # (B, [H,] L, S)
    if key_padding_mask is not None:
        B, S = key_padding_mask.shape
        padding = key_padding_mask.view(B, *[1] * (scores.dim() - 2), S)  # (B, 1, S) or (B, 1, 1, S)
        scores = scores.masked_fill(padding, float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(attn_mask, float("-inf"))  # (L, S) broadcasts
    weights = scores.softmax(dim=-1)  # (B, [H,] L, S), rows sum to 1
    return weights @ value, weights  # output: (B, [H,] L, Ev)
