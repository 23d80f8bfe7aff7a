# A correct solution built from comparisons and float masks: padding via subtraction, the causal mask
# from torch.arange, the masks merged the way nn.MultiheadAttention merges them (float masks added,
# then compared with -inf, fully expanded to (B, H, L, S)), attention with an additive mask and einsum.
# expect: full
# %% cell: padding_mask
def padding_mask(tokens, pad_id=0):
    return (tokens - pad_id) == 0
# %% cell: causal_mask
def causal_mask(size):
    rows = torch.arange(size)[:, None]
    cols = torch.arange(size)[None, :]
    return cols > rows
# %% cell: merge_masks
def merge_masks(key_padding_mask, attn_mask, num_heads):
    some = key_padding_mask if key_padding_mask is not None else attn_mask
    if key_padding_mask is not None:
        B, S = key_padding_mask.shape
    else:
        S = attn_mask.shape[-1]
        B = attn_mask.shape[0] // num_heads if attn_mask.dim() == 3 else 1
    L = attn_mask.shape[-2] if attn_mask is not None else 1
    total = torch.zeros(B, num_heads, L, S, device=some.device)
    if key_padding_mask is not None:
        total = total + torch.zeros(B, 1, 1, S, device=some.device).masked_fill(
            key_padding_mask.reshape(B, 1, 1, S), float("-inf"))
    if attn_mask is not None:
        extra = torch.zeros(attn_mask.shape, device=some.device).masked_fill(attn_mask, float("-inf"))
        total = total + (extra.reshape(B, num_heads, L, S) if attn_mask.dim() == 3 else extra)
    return total == float("-inf")
# %% cell: masked_attention
def masked_attention(query, key, value, key_padding_mask=None, attn_mask=None):
    scores = torch.einsum("...le,...se->...ls", query, key) / query.shape[-1] ** 0.5
    bias = torch.zeros_like(scores)
    if key_padding_mask is not None:
        index = (slice(None),) + (None,) * (scores.dim() - 2) + (slice(None),)
        bias = bias.masked_fill(key_padding_mask[index], float("-inf"))
    if attn_mask is not None:
        bias = bias.masked_fill(attn_mask, float("-inf"))
    weights = torch.softmax(scores + bias, dim=-1)
    return torch.einsum("...ls,...sv->...lv", weights, value), weights
