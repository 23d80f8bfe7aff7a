# Correct: apply_rope keeps its inverse frequencies in a global dictionary keyed by width, base,
# dtype and device (a cache, correct on every device); beam search keeps a heap (heapq.heappush,
# heappop) of hypotheses of a class of its own ordered by __lt__. Full marks.
# expect: full
# %% cell: apply_rope
ROPE_FREQUENCIES = {}


def apply_rope(x, positions, base=10000.0):
    D = x.shape[-1]
    key = (D, float(base), x.dtype, x.device)
    if key not in ROPE_FREQUENCIES:
        ROPE_FREQUENCIES[key] = base ** (-2 * torch.arange(D // 2, dtype=x.dtype, device=x.device) / D)
    angles = positions.to(x.dtype)[:, None] * ROPE_FREQUENCIES[key][None, :]  # (L, D/2)
    first, second = x[..., : D // 2], x[..., D // 2:]
    return torch.cat((first * angles.cos() - second * angles.sin(), first * angles.sin() + second * angles.cos()), -1)
# %% cell: beam_search
import heapq


class Hypothesis:
    """Tokens and their summed log-probability; ordered by score, for a heap."""

    def __init__(self, tokens, score):
        self.tokens, self.score = tokens, score

    def __lt__(self, other):
        return self.score < other.score

    def finished(self, eos):
        return self.tokens[-1] == eos


def beam_search(step_fn, start, beam_size, max_len, eos):
    active, done = [Hypothesis([start], 0.0)], []
    for _ in range(max_len):
        if not active:
            break
        logp = step_fn(torch.tensor([h.tokens for h in active], dtype=torch.int64))
        heap = []  # the beam_size best extensions: a min-heap, its worst on top
        for h, row in zip(active, logp.tolist()):
            for token, lp in enumerate(row):
                candidate = Hypothesis(h.tokens + [token], h.score + lp)
                if len(heap) < beam_size:
                    heapq.heappush(heap, candidate)
                elif heap[0] < candidate:
                    heapq.heapreplace(heap, candidate)
        kept = sorted(heap, reverse=True)
        done += [h for h in kept if h.finished(eos)]
        active = [h for h in kept if not h.finished(eos)]
    best = max(done + active, key=lambda h: h.score / (len(h.tokens) - 1))
    return torch.tensor(best.tokens[1:]), best.score / (len(best.tokens) - 1)
