# A correct solution with torch.isin, the negated lower triangle, torch.logical_or with unsqueeze,
# and F.scaled_dot_product_attention for the output (given ~mask, its True = may attend), the
# weights computed separately with torch.where.
# expect: full
# %% cell: padding_mask
def padding_mask(tokens, pad_id=0):
    return torch.isin(tokens, torch.tensor([pad_id], device=tokens.device, dtype=tokens.dtype))
# %% cell: causal_mask
def causal_mask(size):
    return ~torch.tril(torch.ones(size, size)).bool()
# %% cell: merge_masks
def merge_masks(key_padding_mask, attn_mask, num_heads):
    if attn_mask is not None and attn_mask.ndim == 3:
        attn_mask = attn_mask.unflatten(0, (-1, num_heads))
    if key_padding_mask is None:
        return attn_mask
    pad = key_padding_mask.unsqueeze(1).unsqueeze(2)
    return pad if attn_mask is None else torch.logical_or(pad, attn_mask)
# %% cell: masked_attention
def masked_attention(query, key, value, key_padding_mask=None, attn_mask=None):
    hidden = torch.zeros(query.shape[:-2] + (query.shape[-2], key.shape[-2]), dtype=torch.bool,
                         device=query.device)
    if key_padding_mask is not None:
        pad = key_padding_mask.unsqueeze(1)
        if query.dim() == 4:
            pad = pad.unsqueeze(1)
        hidden = hidden | pad
    if attn_mask is not None:
        hidden = hidden | attn_mask
    output = F.scaled_dot_product_attention(query, key, value, attn_mask=~hidden)
    scores = query @ key.transpose(-1, -2) / math.sqrt(query.shape[-1])
    scores = torch.where(hidden, torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device), scores)
    return output, scores.softmax(-1)
