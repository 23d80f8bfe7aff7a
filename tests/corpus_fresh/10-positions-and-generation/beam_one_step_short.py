# Runs max_len - 1 steps.
# expect: partial
# graded: beam_search
# locus: max_len steps|one step short|one too few|max_len - 1
# %% cell: beam_search
def beam_search(step_fn, start, beam_size, max_len, eos):
    """Keep the beam_size best hypotheses; return (tokens without start, normalised score) of the best."""
    active = [([start], 0.0)]  # (tokens, sum of log-probabilities)
    finished = []
    for _ in range(max_len - 1):
        if not active:
            break
        logp = step_fn(torch.tensor([tokens for tokens, _ in active]))  # (N, V)
        V = logp.size(-1)
        totals = torch.tensor([s for _, s in active], dtype=logp.dtype).unsqueeze(1) + logp  # (N, V)
        best = totals.flatten().topk(beam_size)  # over every hypothesis and every token
        active_next = []
        for score, index in zip(best.values.tolist(), best.indices.tolist()):
            tokens = active[index // V][0] + [index % V]
            (finished if tokens[-1] == eos else active_next).append((tokens, score))
        active = active_next
    # the number of generated tokens: len(tokens) - 1, the start token left out
    tokens, score = max(finished + active, key=lambda h: h[1] / (len(h[0]) - 1))
    return torch.tensor(tokens[1:]), score / (len(tokens) - 1)
