# Correct: plain Python, every candidate in a list sorted by score, finished hypotheses set aside.
# expect: full
# %% cell: beam_search
def beam_search(step_fn, start, beam_size, max_len, eos):
    beams = [(0.0, [start])]
    done = []
    for _ in range(max_len):
        if not beams:
            break
        logp = step_fn(torch.tensor([seq for _, seq in beams])).tolist()
        candidates = [(score + lp, seq + [tok]) for (score, seq), row in zip(beams, logp) for tok, lp in enumerate(row)]
        candidates.sort(key=lambda c: c[0], reverse=True)
        beams = []
        for score, seq in candidates[:beam_size]:
            if seq[-1] == eos:
                done.append((score, seq))
            else:
                beams.append((score, seq))
    score, seq = max(done + beams, key=lambda c: c[0] / (len(c[1]) - 1))
    return torch.tensor(seq[1:], dtype=torch.long), score / (len(seq) - 1)
