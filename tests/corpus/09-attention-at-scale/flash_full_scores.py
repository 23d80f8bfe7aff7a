# Right values, but the whole (L, S) score matrix at once: not block by block.
# expect: partial
# hint: holds the whole (L, S) score matrix
# %% cell: flash_attention
def flash_attention(q, k, v, block_size, causal=False):
    L, S = q.shape[-2], k.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        scores = scores.masked_fill(torch.ones(L, S, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    weights = torch.exp(scores - scores.amax(-1, keepdim=True))
    return (weights / weights.sum(-1, keepdim=True)) @ v
