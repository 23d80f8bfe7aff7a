# The causal mask aligned at the bottom right (query i sees keys up to i + S - L), as a cache would.
# expect: partial
# hint: aligns the last query with the last key
# %% cell: flash_attention
def flash_attention(q, k, v, block_size, causal=False):
    L, S = q.shape[-2], k.shape[-2]
    scale = 1 / math.sqrt(q.shape[-1])
    out = q.new_empty(*q.shape[:-1], v.shape[-1])  # (..., L, Ev)
    for i in range(0, L, block_size):
        q_block = q[..., i:i + block_size, :] * scale  # (..., b, E)
        rows = torch.arange(i, i + q_block.shape[-2], device=q.device)[:, None]  # query positions
        m = torch.full_like(q_block[..., :1], float("-inf"))  # (..., b, 1): running maximum
        l = torch.zeros_like(m)  # (..., b, 1): running sum of exp(scores - m)
        acc = q.new_zeros(*q_block.shape[:-1], v.shape[-1])  # (..., b, Ev): running weighted sum
        for j in range(0, S, block_size):
            if causal and j > i + q_block.shape[-2] - 1 + S - L:
                break  # this tile and the next ones lie entirely after every query of the block
            k_block, v_block = k[..., j:j + block_size, :], v[..., j:j + block_size, :]
            scores = q_block @ k_block.transpose(-2, -1)  # (..., b, b): one tile
            if causal:
                cols = torch.arange(j, j + k_block.shape[-2], device=q.device)[None, :]  # key positions
                scores = scores.masked_fill(cols > rows + S - L, float("-inf"))
            m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))
            p = torch.exp(scores - m_new)  # (..., b, b)
            rescale = torch.exp(m - m_new)  # how much the old maximum overstated the new one
            l = l * rescale + p.sum(dim=-1, keepdim=True)
            acc = acc * rescale + p @ v_block
            m = m_new
        out[..., i:i + block_size, :] = acc / l
    return out
