# Normalises by the number of generated tokens without the end token.
# expect: partial
# hint: Your length leaves out the end token
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
            (done if seq[-1] == eos else beams).append((score, seq))

    def length(seq):
        return len(seq) - 1 - (seq[-1] == eos)

    score, seq = max(done + beams, key=lambda c: c[0] / length(c[1]) if length(c[1]) else float("-inf"))
    return torch.tensor(seq[1:], dtype=torch.long), score / length(seq)
