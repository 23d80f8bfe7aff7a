# Returns the start token with the generated ones.
# expect: partial
# hint: without the start token
# %% cell: beam_search
def beam_search(step_fn, start, beam_size, max_len, eos):
    active = [([start], 0.0)]
    finished = []
    for _ in range(max_len):
        if not active:
            break
        logp = step_fn(torch.tensor([t for t, _ in active]))
        V = logp.shape[-1]
        total = torch.tensor([s for _, s in active], dtype=logp.dtype)[:, None] + logp
        best = total.flatten().topk(beam_size)
        nxt = []
        for s, i in zip(best.values.tolist(), best.indices.tolist()):
            tokens = active[i // V][0] + [i % V]
            (finished if tokens[-1] == eos else nxt).append((tokens, s))
        active = nxt
    tokens, score = max(finished + active, key=lambda h: h[1] / (len(h[0]) - 1))
    return torch.tensor(tokens), score / (len(tokens) - 1)
