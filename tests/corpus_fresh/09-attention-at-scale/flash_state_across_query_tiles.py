# Starts the running maximum, sum and output once, before the loop over query tiles: each tile continues the previous tile's statistics.
# expect: partial
# graded: flash_attention
# locus: query tile|each tile|reset|block of queries|previous tile|per query block|query block
# %% cell: flash_attention
def flash_attention(q, k, v, block_size, causal=False):
    n_q, n_k = q.size(-2), k.size(-2)
    inv_sqrt = q.size(-1) ** -0.5
    result = q.new_empty((*q.shape[:-1], v.size(-1)))
    best = total = acc = None
    for qs in range(0, n_q, block_size):
        qt = q[..., qs:qs + block_size, :] * inv_sqrt
        nq = qt.size(-2)
        q_pos = torch.arange(qs, qs + nq, device=q.device).unsqueeze(-1)
        if best is None or best.size(-2) != nq:
            best = qt.new_full((*qt.shape[:-1], 1), float("-inf"))
            total = torch.zeros_like(best)
            acc = qt.new_zeros((*qt.shape[:-1], v.size(-1)))
        for ks in range(0, n_k, block_size):
            if causal and ks >= qs + nq:
                break
            kt, vt = k[..., ks:ks + block_size, :], v[..., ks:ks + block_size, :]
            s = torch.matmul(qt, kt.mT)
            if causal:
                k_pos = torch.arange(ks, ks + kt.size(-2), device=q.device).unsqueeze(0)
                s = s.masked_fill(k_pos > q_pos, float("-inf"))
            top = torch.maximum(best, s.max(dim=-1, keepdim=True).values)
            w = (s - top).exp()
            shrink = (best - top).exp()
            total = total * shrink + w.sum(dim=-1, keepdim=True)
            acc = acc * shrink + torch.matmul(w, vt)
            best = top
        result[..., qs:qs + nq, :] = acc / total
    return result
