# Correct: pads queries, keys and values to whole blocks with F.pad, masks the padded keys, and
# drops the padded query rows at the end.
# expect: full
# %% cell: flash_attention
def flash_attention(q, k, v, block_size, causal=False):
    L, S = q.shape[-2], k.shape[-2]
    pad_q, pad_k = -L % block_size, -S % block_size
    q = F.pad(q, (0, 0, 0, pad_q)) / math.sqrt(q.shape[-1])
    k, v = F.pad(k, (0, 0, 0, pad_k)), F.pad(v, (0, 0, 0, pad_k))
    outputs = []
    for i in range(0, L + pad_q, block_size):
        q_block = q[..., i:i + block_size, :]
        m = q_block.new_full((*q_block.shape[:-1], 1), float("-inf"))
        l = q_block.new_zeros((*q_block.shape[:-1], 1))
        acc = q_block.new_zeros((*q_block.shape[:-1], v.shape[-1]))
        query_pos = torch.arange(i, i + block_size, device=q.device).unsqueeze(-1)
        for j in range(0, S + pad_k, block_size):
            key_pos = torch.arange(j, j + block_size, device=q.device).unsqueeze(0)
            hidden = key_pos >= S
            if causal:
                hidden = hidden | (key_pos > query_pos)
            scores = (q_block @ k[..., j:j + block_size, :].mT).masked_fill(hidden, float("-inf"))
            m_new = torch.maximum(m, scores.max(dim=-1, keepdim=True).values)
            m_safe = m_new.nan_to_num(neginf=0.0)
            p = (scores - m_safe).exp()
            alpha = (m - m_safe).exp()
            l = alpha * l + p.sum(-1, keepdim=True)
            acc = alpha * acc + p @ v[..., j:j + block_size, :]
            m = m_new
        outputs.append(acc / l)
    return torch.cat(outputs, dim=-2)[..., :L, :]
