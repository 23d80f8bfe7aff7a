"""Checks for assignment 10-positions-and-generation: apply_rope, alibi_bias,
next_token_distribution, sample_next and beam_search (inputs only; they are judged by
attention_checks.answers.positions_generation).

A case is a small dict; every key is optional:

    apply_rope:              B=2, H=None (x (B, L, D); an int: (B, H, L, D)), L=6, D=8,
                             positions="arange" | "offset" | "random", base=None (not passed:
                             the default 10000), dtype="float32", seed
    alibi_bias:              num_heads=4, L=5, S=L
    next_token_distribution: B=3, V=10, temperature=1.0, top_k=None, top_p=None, std=2.0,
                             dtype="float32", seed
    sample_next:             the same keys, and draws=40 (rows: the B distributions repeated)
    beam_search:             V=6, beam_size=3, max_len=6, start=1, eos=0, seed

apply_rope rotates the halves: feature i pairs with feature i + D/2 (the convention of GPT-NeoX
and Llama). Besides its output, the check records the "score drift": with keys from the case
(extra), the student's rotated queries and keys give the scores q_i . k_j at the case's
positions and at the positions shifted by 7; for any rotation by position their difference is 0
(the scores depend on i - j only). It is computed from the student's outputs alone.

sample_next is checked on the CPU with a torch.Generator seeded from the case: the contract is
torch.multinomial(probs, 1, generator=generator) on next_token_distribution's probabilities, so
the same generator gives the same tokens. beam_search gets step_fn, a small fixed language model
(ToyLM, float64) whose next-token log-probabilities depend on the last two tokens and the
position; its result is recorded as (tokens, score), the score a plain float.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .cases import Inputs, Spec
from .core import as_dtype, randn
from .localise import axis, ladder
from .registry import Check, declare

Tensor = torch.Tensor
SHIFT = 7  # positions moved by this much must leave every score unchanged
DRIFT = "score drift"  # scores at positions + SHIFT minus scores at the positions (expected: 0)


# --------------------------------------------------------------------------
# apply_rope


def _rope_positions(c: Spec, gen: torch.Generator) -> Tensor:
    L = c["L"]
    if c["positions"] == "arange":
        return torch.arange(L)
    if c["positions"] == "offset":  # a window further into a sequence, as when generating with a cache
        return torch.arange(L) + int(torch.randint(3, 40, (), generator=gen))
    if c["positions"] == "random":  # any positions, in any order (e.g. packed sequences)
        return torch.randperm(48, generator=gen)[:L]
    raise ValueError(f"positions must be 'arange', 'offset' or 'random', not {c['positions']!r}")


def _rope_inputs(c: Spec, gen: torch.Generator) -> Inputs:
    if c["D"] % 2:
        raise ValueError(f"apply_rope needs an even D, not {c['D']}")
    dtype = as_dtype(c["dtype"])
    heads = () if c["H"] is None else (c["H"],)
    x = randn(c["B"], *heads, c["L"], c["D"], gen=gen, dtype=dtype)  # (B, [H,] L, D): the queries
    keys = randn(c["B"], *heads, c["L"], c["D"], gen=gen, dtype=dtype)  # the same shape: keys for the drift
    positions = _rope_positions(c, gen)  # (L,) int64
    kwargs = {} if c["base"] is None else dict(base=c["base"])
    return Inputs(dict(x=x, positions=positions), kwargs, extra=dict(keys=keys))


def scores(q: Any, k: Any) -> Any:
    """q_i . k_j for every pair, (..., L, L); None when the outputs cannot be multiplied."""
    try:
        return q @ k.transpose(-2, -1)
    except Exception:  # noqa: BLE001 - whatever the student's code returned
        return None


def _rope_call(fn: Any, x: Inputs, c: Spec) -> Any:
    out = fn(*x.args.values(), **x.kwargs)
    keys, positions = x.extra["keys"], x.args["positions"]
    here = scores(out, fn(keys, positions, **x.kwargs))
    later = scores(fn(x.args["x"], positions + SHIFT, **x.kwargs), fn(keys, positions + SHIFT, **x.kwargs))
    drift = later - here if isinstance(here, Tensor) and isinstance(later, Tensor) \
        and here.shape == later.shape else None
    return out, drift


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
ROPE_AXES = ladder(
    dict(B=1, L=2, D=4, dtype="float64"),
    axis("two pairs of features (D=4)", "the frequencies base^(-2i/D) from index i = 0, one per pair of features (i and i + D/2)",
         (dict(D=2), "one pair (D=2, frequency 1)"), downward=True),
    axis("positions 0, 1", "the rotation itself: the angle table (positions × frequencies), its cos and sin, and which half each multiplies",
         (dict(L=1), "position 0 alone (no rotation)"), downward=True),
    axis("two pairs of features (D=4)", "the frequencies base^(-2i/D) from index i = 0, one per pair of features (i and i + D/2)",
         (dict(D=8), "four pairs (D=8)")),
    axis("positions 0, 1", "the positions you are given, and how each turns into an angle",
         (dict(L=5), "positions 0..4"), (dict(L=5, positions="offset"), "positions that start further on"),
         (dict(L=5, positions="random"), "positions in any order")),
    axis("the default base", "where the base goes in the frequencies", (dict(base=100.0), "base=100")),
    axis("x of shape (B, L, D)", "the axes you rotate over (the last one, per position)",
         (dict(H=2), "x with a heads axis (B, H, L, D)"), (dict(B=3), "a batch of 3")),
    axis("float64", "the dtypes you compute in", (dict(dtype="float32"), "float32")),
)

check_apply_rope = declare(Check(
    name="apply_rope", assignment="10-positions-and-generation",
    axes=ROPE_AXES,
    defaults=dict(B=2, H=None, L=6, D=8, positions="arange", base=None, dtype="float32"),
    inputs=_rope_inputs, outputs=("output", DRIFT), call=_rope_call,
))


# --------------------------------------------------------------------------
# alibi_bias


def _alibi_inputs(c: Spec, gen: torch.Generator) -> Inputs:
    H = c["num_heads"]
    if H < 1 or H & (H - 1):
        raise ValueError(f"alibi_bias is specified for a power of two heads, not {H}")
    S = c["S"] or c["L"]
    if S < c["L"]:
        raise ValueError(f"alibi_bias needs S >= L (the queries are the last L of S positions), not L={c['L']}, S={S}")
    return Inputs(dict(num_heads=H, L=c["L"], S=S))


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
ALIBI_AXES = ladder(
    dict(num_heads=1, L=2, S=None),
    axis("2 queries and keys", "the bias away from distance 0: each head's slope times the distance",
         (dict(L=1), "one query and one key"), downward=True),
    axis("2 queries and keys", "the distances (key position minus query position)",
         (dict(L=4), "4 queries and keys"), (dict(L=2, S=5), "the last 2 queries of 5 positions")),
    axis("one head", "the slopes, one per head: powers of 2, 2^(-8h/H) for head h = 1..H, each over its own (L, S)", (dict(num_heads=2), "2 heads"),
         (dict(num_heads=8), "8 heads"), (dict(num_heads=16), "16 heads")),
)

check_alibi_bias = declare(Check(
    name="alibi_bias", assignment="10-positions-and-generation",
    axes=ALIBI_AXES,
    defaults=dict(num_heads=4, L=5, S=None), inputs=_alibi_inputs, outputs=("bias",),
    on_device=False,  # alibi_bias(num_heads, L, S) has no tensor input: its bias is on the CPU
))


# --------------------------------------------------------------------------
# next_token_distribution and sample_next


SAMPLING_DEFAULTS = dict(B=3, V=10, temperature=1.0, top_k=None, top_p=None, std=2.0, dtype="float32")


def _filters(c: Spec) -> dict[str, Any]:
    if c["temperature"] <= 0:
        raise ValueError(f"temperature must be > 0, not {c['temperature']}")
    return dict(temperature=c["temperature"], top_k=c["top_k"], top_p=c["top_p"])


def _distribution_inputs(c: Spec, gen: torch.Generator) -> Inputs:
    logits = randn(c["B"], c["V"], gen=gen, dtype=as_dtype(c["dtype"]), std=c["std"])  # (B, V)
    return Inputs(dict(logits=logits), _filters(c))


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
DISTRIBUTION_AXES = ladder(
    dict(B=1, V=5, dtype="float64"),
    axis("temperature 1", "where the temperature divides the logits", (dict(temperature=0.5), "temperature 0.5"),
         (dict(temperature=2.0), "temperature 2")),
    axis("no top-k", "the top-k filter (the k-th largest logit is the threshold)", (dict(top_k=1), "top_k=1"), (dict(top_k=3), "top_k=3")),
    axis("no top-p", "the top-p filter (sorted, most probable first, kept until the sum reaches top_p)", (dict(top_p=0.5, seed=1), "top_p=0.5"), (dict(top_p=0.9, seed=2), "top_p=0.9")),
    axis("one filter at a time", "the order of the filters (temperature, then top-k, then top-p)",
         (dict(top_k=3, top_p=0.6, temperature=0.7, seed=3), "temperature, top_k and top_p together")),
    axis("one row", "the axis you normalise over (the vocabulary, per row)", (dict(B=3), "three rows")),
    axis("float64", "the dtypes you compute in", (dict(dtype="float32"), "float32")),
)

check_next_token_distribution = declare(Check(
    name="next_token_distribution", assignment="10-positions-and-generation", defaults=SAMPLING_DEFAULTS,
    axes=DISTRIBUTION_AXES,
    inputs=_distribution_inputs, outputs=("probs",),
))


def _sample_inputs(c: Spec, gen: torch.Generator) -> Inputs:
    logits = randn(c["B"], c["V"], gen=gen, dtype=as_dtype(c["dtype"]), std=c["std"])  # (B, V)
    rows = logits.repeat(c["draws"], 1)  # (draws * B, V): each distribution sampled `draws` times
    draw_seed = int(torch.randint(2 ** 31, (), generator=gen))
    return Inputs(dict(logits=rows), _filters(c), extra=dict(draw_seed=draw_seed),
                  note=f"({c['B']} distributions, each drawn {c['draws']} times; a generator seeded {draw_seed})")


def sampling_generator(x: Inputs) -> torch.Generator:
    return torch.Generator().manual_seed(x.extra["draw_seed"])


def _sample_call(fn: Any, x: Inputs, c: Spec) -> Any:
    return fn(*x.args.values(), **x.kwargs, generator=sampling_generator(x))


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
SAMPLE_AXES = ladder(
    dict(B=1, V=5, draws=8, dtype="float64"),
    *DISTRIBUTION_AXES.axes[:4],
    axis("one distribution", "how rows are drawn (one token per row, with the generator)",
         (dict(B=3), "three distributions")),
)

check_sample_next = declare(Check(
    name="sample_next", assignment="10-positions-and-generation", defaults=dict(SAMPLING_DEFAULTS, draws=40),
    axes=SAMPLE_AXES,
    inputs=_sample_inputs, outputs=("tokens",), call=_sample_call,
    on_device=False,  # the generator is a CPU one: the same draws on every machine
))


# --------------------------------------------------------------------------
# beam_search


class ToyLM:
    """A small fixed language model: step_fn(tokens (N, t) int64) -> (N, V) float64 log-probabilities
    of the next token, from the last two tokens and the position t."""

    def __init__(self, state: dict[str, Tensor]):
        self.last, self.before, self.position = (state[k].to(torch.float64) for k in ("last", "before", "position"))

    def __call__(self, tokens: Tensor) -> Tensor:
        tokens = torch.as_tensor(tokens).long().cpu()
        t = tokens.shape[1]
        before = self.before[tokens[:, -2]] if t > 1 else torch.zeros_like(self.last[tokens[:, -1]])
        logits = self.last[tokens[:, -1]] + before + self.position[min(t, self.position.shape[0] - 1)]
        return F.log_softmax(logits, dim=-1)  # (N, V)


def toy_lm_state(V: int, max_len: int, eos: int, gen: torch.Generator) -> dict[str, Tensor]:
    draw = lambda *shape, std: randn(*shape, gen=gen, dtype=torch.float64, std=std)  # noqa: E731
    position = draw(max_len + 2, V, std=0.5)
    position[:, eos] += torch.linspace(-2.0, 1.0, max_len + 2, dtype=torch.float64)  # EOS likelier later on
    return dict(last=draw(V, V, std=1.5), before=draw(V, V, std=1.0), position=position)


def _beam_inputs(c: Spec, gen: torch.Generator) -> Inputs:
    V, eos, start = c["V"], c["eos"], c["start"]
    if c["beam_size"] > V:
        raise ValueError(f"beam_size {c['beam_size']} > V {V}")
    if not (0 <= eos < V and 0 <= start < V):
        raise ValueError("start and eos must be tokens of the vocabulary")
    state = toy_lm_state(V, c["max_len"], eos, gen)
    return Inputs(dict(step_fn=None, start=start, beam_size=c["beam_size"], max_len=c["max_len"], eos=eos),
                  extra=dict(state=state))


def _beam_call(fn: Any, x: Inputs, c: Spec) -> Any:
    result = fn(*dict(x.args, step_fn=ToyLM(x.extra["state"])).values())
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        what = type(result).__name__ + (f" of length {len(result)}" if isinstance(result, (tuple, list)) else "")
        raise TypeError(f"beam_search returned a {what}; it must return a tuple (tokens, score)")
    tokens, score = result
    if isinstance(tokens, (list, tuple)):
        tokens = torch.tensor(tokens, dtype=torch.int64)
    if isinstance(score, Tensor) and score.numel() == 1:
        score = float(score)
    return tokens, score


def _beam_describe(x: Inputs, c: Spec) -> str:
    return (f"a fixed model with vocabulary {c['V']}, start={c['start']}, beam_size={c['beam_size']}, "
            f"max_len={c['max_len']}, eos={c['eos']}")


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
BEAM_AXES = ladder(
    dict(V=5, beam_size=1, max_len=3),
    axis("a beam of 1 (greedy)", "how the beam keeps its best hypotheses", (dict(beam_size=2), "a beam of 2"),
         (dict(beam_size=4), "a beam of 4")),
    axis("at most 3 tokens", "when hypotheses end (eos, max_len)", (dict(max_len=1), "at most 1 token")),
    axis("at most 3 tokens", "when hypotheses end (eos, max_len) and how finished ones are compared",
         (dict(max_len=6, beam_size=2), "at most 6 tokens with a beam of 2")),
    axis("start 1, eos 0", "the start and eos tokens you are given", (dict(start=3, eos=4, beam_size=2), "start 3, eos 4")),
)

check_beam_search = declare(Check(
    name="beam_search", assignment="10-positions-and-generation",
    axes=BEAM_AXES,
    defaults=dict(V=6, beam_size=3, max_len=6, start=1, eos=0),
    inputs=_beam_inputs, outputs=("tokens", "score"), call=_beam_call, describe=_beam_describe, on_device=False,
))
