# Blocks of queries against all the keys at once (chunked attention): a whole row of tiles.
# expect: partial
# hint: a whole row (or column) of blocks of scores at once
# %% cell: flash_attention
def flash_attention(q, k, v, block_size, causal=False):
    L, S = q.shape[-2], k.shape[-2]
    outputs = []
    for i in range(0, L, block_size):
        scores = q[..., i:i + block_size, :] @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., b, S)
        if causal:
            rows = torch.arange(i, i + scores.shape[-2], device=q.device)[:, None]
            scores = scores.masked_fill(torch.arange(S, device=q.device)[None, :] > rows, float("-inf"))
        weights = torch.exp(scores - scores.amax(-1, keepdim=True))
        outputs.append(weights / weights.sum(-1, keepdim=True) @ v)
    return torch.cat(outputs, dim=-2)
