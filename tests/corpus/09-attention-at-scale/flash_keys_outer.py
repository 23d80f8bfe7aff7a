# Correct: the key blocks in the outer loop and the query blocks inside, with running statistics
# for every query row kept in tensors of the output's size (still one tile of scores at a time).
# expect: full
# %% cell: flash_attention
def flash_attention(q, k, v, block_size, causal=False):
    L, S = q.shape[-2], k.shape[-2]
    m = torch.full_like(q[..., :1], float("-inf"))  # (..., L, 1)
    l = torch.zeros_like(m)
    acc = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype, device=q.device)  # (..., L, Ev)
    for j in range(0, S, block_size):
        k_block, v_block = k[..., j:j + block_size, :], v[..., j:j + block_size, :]
        for i in range(0, L, block_size):
            rows = slice(i, i + block_size)
            scores = torch.einsum("...qe,...ke->...qk", q[..., rows, :], k_block) / q.shape[-1] ** 0.5
            if causal:
                qpos = torch.arange(i, min(i + block_size, L), device=q.device)
                kpos = torch.arange(j, j + k_block.shape[-2], device=q.device)
                scores = scores.masked_fill(kpos[None, :] > qpos[:, None], float("-inf"))
            new_max = torch.maximum(m[..., rows, :], scores.amax(-1, keepdim=True))
            # a row whose keys are all masked so far keeps -inf: exp(-inf - -inf) would be nan
            safe = torch.where(new_max == float("-inf"), torch.zeros_like(new_max), new_max)
            p = torch.exp(scores - safe)
            factor = torch.exp(m[..., rows, :] - safe)
            l = l.clone()
            acc = acc.clone()
            l[..., rows, :] = l[..., rows, :] * factor + p.sum(-1, keepdim=True)
            acc[..., rows, :] = acc[..., rows, :] * factor + p @ v_block
            m = m.clone()
            m[..., rows, :] = new_max
    return acc / l
