# A correct solution whose masked_attention computes in float64 with the notebook's own merge_masks
# (adding a head axis to 3-D inputs and removing it again) and the smallest float instead of -inf,
# then casts back to the input's dtype.
# expect: full
# %% cell: padding_mask
def padding_mask(tokens, pad_id=0):
    return tokens.eq(pad_id)
# %% cell: causal_mask
def causal_mask(size):
    return torch.triu(torch.full((size, size), True), 1)
# %% cell: merge_masks
def merge_masks(key_padding_mask, attn_mask, num_heads):
    if attn_mask is not None and attn_mask.dim() == 3:
        attn_mask = attn_mask.reshape(-1, num_heads, *attn_mask.shape[1:])
    padding = None if key_padding_mask is None else key_padding_mask[:, None, None, :]
    if padding is None:
        return attn_mask
    if attn_mask is None:
        return padding
    return padding + attn_mask  # + on booleans is a logical or
# %% cell: masked_attention
def masked_attention(query, key, value, key_padding_mask=None, attn_mask=None):
    heads = query.dim() == 4
    q, k, v = (t.double() if heads else t.double().unsqueeze(1) for t in (query, key, value))
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, L, S)
    if key_padding_mask is not None or attn_mask is not None:
        hidden = merge_masks(key_padding_mask, attn_mask, q.size(1))
        scores = scores.masked_fill(hidden, torch.finfo(scores.dtype).min)
    weights = scores.softmax(-1)
    output = weights @ v
    if not heads:
        output, weights = output.squeeze(1), weights.squeeze(1)
    return output.to(query.dtype), weights.to(query.dtype)
