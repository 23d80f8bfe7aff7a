# Hugging Face's convention: a finished hypothesis is set aside and the beam is refilled with the next
# best unfinished extensions, so that it always holds beam_size of them (the contract lets it shrink).
# expect: partial
# hint: Your beam is refilled to beam_size hypotheses
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
        for rank, (score, seq) in enumerate(candidates):
            if seq[-1] == eos:
                if rank < beam_size:
                    done.append((score, seq))
            else:
                beams.append((score, seq))
            if len(beams) == beam_size:
                break
    score, seq = max(done + beams, key=lambda c: c[0] / (len(c[1]) - 1))
    return torch.tensor(seq[1:], dtype=torch.long), score / (len(seq) - 1)
