# Correct: the active hypotheses as one (N, t) tensor, their scores as a tensor, divmod on the flat top-k.
# expect: full
# %% cell: beam_search
def beam_search(step_fn, start, beam_size, max_len, eos):
    seqs = torch.full((1, 1), start, dtype=torch.long)
    scores = torch.zeros(1, dtype=torch.float64)
    finished = []
    for _ in range(max_len):
        logp = step_fn(seqs)
        total = (scores[:, None] + logp).flatten()
        top = torch.topk(total, beam_size)
        rows = torch.div(top.indices, logp.shape[1], rounding_mode="floor")
        toks = top.indices % logp.shape[1]
        seqs = torch.cat([seqs[rows], toks[:, None]], dim=1)
        ended = toks == eos
        finished += [(s, seq) for s, seq in zip(top.values[ended], seqs[ended])]
        seqs, scores = seqs[~ended], top.values[~ended]
        if len(seqs) == 0:
            break
    candidates = finished + list(zip(scores, seqs))
    best_score, best = max(candidates, key=lambda c: c[0].item() / (len(c[1]) - 1))
    return best[1:], best_score.item() / (len(best) - 1)
