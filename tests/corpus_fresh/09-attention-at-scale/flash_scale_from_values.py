# Scales the scores by 1/sqrt(Ev), the width of the values, instead of 1/sqrt(E).
# expect: partial
# graded: flash_attention
# locus: q.size(-1)|q.shape[-1]|values' width|width of the values|v.size(-1)|sqrt(Ev)
# %% cell: flash_attention
def flash_attention(q, k, v, block_size, causal=False):
    """softmax(q k^T / sqrt(E)) v computed tile by tile, as FlashAttention's forward pass.

    q: (..., L, E); k: (..., S, E); v: (..., S, Ev); causal: query i sees keys j <= i
    returns (..., L, Ev); never holds more than one (block_size, block_size) tile of scores
    """
    n_q, n_k = q.size(-2), k.size(-2)
    inv_sqrt = v.size(-1) ** -0.5
    result = q.new_empty((*q.shape[:-1], v.size(-1)))  # (..., L, Ev)
    for qs in range(0, n_q, block_size):
        qt = q[..., qs:qs + block_size, :] * inv_sqrt  # (..., b, E): a tile of queries, scaled
        nq = qt.size(-2)
        q_pos = torch.arange(qs, qs + nq, device=q.device).unsqueeze(-1)  # (b, 1): their positions
        best = qt.new_full((*qt.shape[:-1], 1), float("-inf"))  # (..., b, 1): largest score so far
        total = torch.zeros_like(best)  # (..., b, 1): sum of exp(score - best) so far
        acc = qt.new_zeros((*qt.shape[:-1], v.size(-1)))  # (..., b, Ev): weighted sum of values so far
        for ks in range(0, n_k, block_size):
            if causal and ks >= qs + nq:
                break  # every key from here on comes after every query of this tile
            kt, vt = k[..., ks:ks + block_size, :], v[..., ks:ks + block_size, :]
            s = torch.matmul(qt, kt.mT)  # (..., b, b): one tile of scores
            if causal:
                k_pos = torch.arange(ks, ks + kt.size(-2), device=q.device).unsqueeze(0)  # (1, b)
                s = s.masked_fill(k_pos > q_pos, float("-inf"))
            top = torch.maximum(best, s.max(dim=-1, keepdim=True).values)
            w = (s - top).exp()  # (..., b, b)
            shrink = (best - top).exp()  # rescales what was summed under the old maximum
            total = total * shrink + w.sum(dim=-1, keepdim=True)
            acc = acc * shrink + torch.matmul(w, vt)
            best = top
        result[..., qs:qs + nq, :] = acc / total
    return result
