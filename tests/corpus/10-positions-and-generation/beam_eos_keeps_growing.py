# Never sets finished hypotheses aside: they keep being extended after EOS.
# expect: partial
# hint: go on after EOS
# %% cell: beam_search
def beam_search(step_fn, start, beam_size, max_len, eos):
    beams = [([start], 0.0)]
    for _ in range(max_len):
        logp = step_fn(torch.tensor([t for t, _ in beams]))
        V = logp.shape[-1]
        total = torch.tensor([s for _, s in beams], dtype=logp.dtype)[:, None] + logp
        best = total.flatten().topk(beam_size)
        beams = [(beams[i // V][0] + [i % V], s) for s, i in zip(best.values.tolist(), best.indices.tolist())]
    tokens, score = max(beams, key=lambda h: h[1] / (len(h[0]) - 1))
    return torch.tensor(tokens[1:]), score / (len(tokens) - 1)
