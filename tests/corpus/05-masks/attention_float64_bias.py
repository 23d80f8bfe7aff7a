# Builds the additive mask in float64 "for accuracy": float32 inputs then give float64 outputs.
# expect: partial
# hint: must have the inputs' dtype (float32)
# %% cell: masked_attention
def masked_attention(query, key, value, key_padding_mask=None, attn_mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    bias = torch.zeros(scores.shape, dtype=torch.float64, device=scores.device)
    if key_padding_mask is not None:
        B, S = key_padding_mask.shape
        bias = bias.masked_fill(key_padding_mask.view(B, *[1] * (scores.dim() - 2), S), float("-inf"))
    if attn_mask is not None:
        bias = bias.masked_fill(attn_mask, float("-inf"))
    weights = (scores + bias).softmax(dim=-1)
    return weights @ value.to(weights.dtype), weights
