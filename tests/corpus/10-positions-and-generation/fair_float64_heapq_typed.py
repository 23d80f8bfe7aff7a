# Correct, typed: apply_rope computes its angles in float64 and casts cos and sin to x's dtype
# (more precise than the formula in x's dtype), halves from chunk; ALiBi's slopes from a list
# comprehension and its distances by broadcasting; next_token_distribution keeps top-k with
# kthvalue and top-p by sorting once and gathering back with argsort; sample_next squeezes with
# view; beam search keeps its beam with heapq.nlargest over (score, tokens) pairs. Full marks.
# expect: full
# %% cell: apply_rope
from __future__ import annotations


def apply_rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    half = x.shape[-1] // 2
    exponent = torch.arange(half, dtype=torch.float64, device=x.device) * (-2.0 / x.shape[-1])
    angles = positions.to(torch.float64)[:, None] * torch.pow(base, exponent)[None, :]  # (L, D/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
# %% cell: alibi_bias
from __future__ import annotations


def alibi_bias(num_heads: int, L: int, S: int) -> torch.Tensor:
    slopes = torch.tensor([2 ** (-8 * (h + 1) / num_heads) for h in range(num_heads)], dtype=torch.float32)
    queries = torch.arange(S - L, S)[:, None]  # (L, 1): absolute positions of the queries
    keys = torch.arange(S)[None, :]  # (1, S)
    distance = (queries - keys).to(torch.float32)  # (L, S)
    return -slopes[:, None, None] * distance  # (H, L, S)
# %% cell: sampling
from __future__ import annotations

from typing import Optional


def next_token_distribution(logits: torch.Tensor, temperature: float = 1.0, top_k: Optional[int] = None,
                            top_p: Optional[float] = None) -> torch.Tensor:
    probs = torch.softmax(logits / temperature, dim=-1)
    vocab = probs.shape[-1]
    if top_k is not None and top_k < vocab:
        kth = probs.kthvalue(vocab - top_k + 1, dim=-1, keepdim=True).values  # the k-th largest
        probs = torch.where(probs >= kth, probs, torch.zeros_like(probs))
        probs = probs / probs.sum(-1, keepdim=True)
    if top_p is not None:
        ordered, order = probs.sort(dim=-1, descending=True)
        before = ordered.cumsum(dim=-1) - ordered  # mass of the tokens ranked above
        ordered = torch.where(before < top_p, ordered, torch.zeros_like(ordered))
        probs = ordered.gather(-1, order.argsort(dim=-1))
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def sample_next(logits: torch.Tensor, temperature: float = 1.0, top_k: Optional[int] = None,
                top_p: Optional[float] = None, generator: Optional[torch.Generator] = None) -> torch.Tensor:
    probs = next_token_distribution(logits, temperature=temperature, top_k=top_k, top_p=top_p)
    return torch.multinomial(probs, 1, generator=generator).view(-1).long()
# %% cell: beam_search
from __future__ import annotations

import heapq


def beam_search(step_fn, start: int, beam_size: int, max_len: int, eos: int):
    beam: list[tuple[float, list[int]]] = [(0.0, [start])]
    finished: list[tuple[float, list[int]]] = []
    for _ in range(max_len):
        if not beam:
            break
        logp = step_fn(torch.tensor([tokens for _, tokens in beam], dtype=torch.long))  # (N, V)
        candidates = ((score + lp, tokens + [token])
                      for (score, tokens), row in zip(beam, logp.tolist())
                      for token, lp in enumerate(row))
        kept = heapq.nlargest(beam_size, candidates, key=lambda c: c[0])
        finished += [c for c in kept if c[1][-1] == eos]
        beam = [c for c in kept if c[1][-1] != eos]
    score, tokens = max(finished + beam, key=lambda c: c[0] / (len(c[1]) - 1))
    return torch.tensor(tokens[1:], dtype=torch.long), score / (len(tokens) - 1)
