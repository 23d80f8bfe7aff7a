# Correct: ALiBi's slopes from a helper cached with functools.lru_cache (a tuple of floats);
# apply_rope pairs the halves as complex numbers (x1 + i·x2) rotated by torch.polar; top-k with
# torch.topk and scatter, top-p on sorted probabilities; beam search with a namedtuple of
# hypotheses extended with _replace (a named tuple's own API) and sorted by score. Full marks.
# expect: full
# %% cell: apply_rope
def apply_rope(x, positions, base=10000.0):
    half = x.shape[-1] // 2
    real_dtype = x.dtype
    freqs = base ** (-torch.arange(half, device=x.device, dtype=real_dtype) * 2 / x.shape[-1])
    angles = positions.to(real_dtype).unsqueeze(-1) * freqs  # (L, D/2)
    rotation = torch.polar(torch.ones_like(angles), angles)  # e^{i·angle}
    pairs = torch.complex(x[..., :half], x[..., half:])  # x1 + i·x2
    rotated = pairs * rotation
    return torch.cat((rotated.real, rotated.imag), dim=-1).to(real_dtype)
# %% cell: alibi_bias
from functools import lru_cache


@lru_cache(maxsize=None)
def alibi_slopes(num_heads):
    """m_h = 2^(-8 (h + 1) / H), head 0 the steepest."""
    return tuple(2.0 ** (-8.0 * (h + 1) / num_heads) for h in range(num_heads))


def alibi_bias(num_heads, L, S):
    slopes = torch.tensor(alibi_slopes(num_heads)).view(num_heads, 1, 1)
    i = torch.arange(L).view(1, L, 1)
    j = torch.arange(S).view(1, 1, S)
    return -slopes * (i + (S - L) - j).float()
# %% cell: sampling
def next_token_distribution(logits, temperature=1.0, top_k=None, top_p=None):
    p = torch.softmax(logits / temperature, dim=-1)
    if top_k is not None:
        k = min(top_k, p.shape[-1])
        kept = torch.zeros_like(p, dtype=torch.bool).scatter(-1, p.topk(k, dim=-1).indices, True)
        kth = p.topk(k, dim=-1).values[..., -1:]
        p = torch.where(kept | (p == kth), p, 0.0)  # ties with the k-th are kept
        p /= p.sum(dim=-1, keepdim=True)
    if top_p is not None:
        sorted_p, order = p.sort(dim=-1, descending=True)
        drop_sorted = sorted_p.cumsum(-1) - sorted_p >= top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        p = p.masked_fill(drop, 0.0)
        p = p / p.sum(dim=-1, keepdim=True)
    return p


def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    probs = next_token_distribution(logits, temperature, top_k, top_p)
    return probs.multinomial(1, generator=generator).flatten()
# %% cell: beam_search
from collections import namedtuple

Hypothesis = namedtuple("Hypothesis", ["tokens", "score"])


def beam_search(step_fn, start, beam_size, max_len, eos):
    active, finished = [Hypothesis([start], 0.0)], []
    for _ in range(max_len):
        if not active:
            break
        logp = step_fn(torch.tensor([h.tokens for h in active]))
        extended = [h._replace(tokens=h.tokens + [t], score=h.score + float(lp))
                    for h, row in zip(active, logp) for t, lp in enumerate(row)]
        extended.sort(key=lambda h: h.score, reverse=True)
        best = extended[:beam_size]
        finished.extend(h for h in best if h.tokens[-1] == eos)
        active = [h for h in best if h.tokens[-1] != eos]
    winner = max(finished + active, key=lambda h: h.score / (len(h.tokens) - 1))
    return torch.tensor(winner.tokens[1:], dtype=torch.int64), winner.score / (len(winner.tokens) - 1)
