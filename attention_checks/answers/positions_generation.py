"""How 10-positions-and-generation is judged: the formulas in float64 on the CPU (nothing in
PyTorch computes them), and the known mistakes of each graded piece."""
from __future__ import annotations

from typing import Any, Callable

import torch

from ..cases import Inputs, Spec
from ..positions_generation import DRIFT, SHIFT, ToyLM, sampling_generator, scores
from .catalogue import Answer, Depends, Fit, Mistake

Tensor = torch.Tensor
NEG_INF = float("-inf")


# --------------------------------------------------------------------------
# apply_rope


def rope(x: Tensor, positions: Tensor, base: float = 10000.0, *, pairs: str = "halves", sign: float = 1.0,
         exponent: float = 2.0, keep_second: bool = False) -> Tensor:
    """Rotary positions: each pair (x1, x2) rotated by the angle position * base^(-2i/D).

    pairs="halves" pairs feature i with i + D/2 (the contract); "interleaved" pairs 2i with 2i+1.
    The keyword arguments other than base make the known mistakes."""
    D = x.shape[-1]
    half = D // 2
    theta = base ** (-exponent * torch.arange(half, dtype=torch.float64) / D)  # (D/2,)
    angle = positions.to(torch.float64)[:, None] * theta  # (L, D/2)
    cos, sin = angle.cos(), sign * angle.sin()
    if pairs == "halves":
        x1, x2 = x[..., :half], x[..., half:]
    else:
        x1, x2 = x[..., 0::2], x[..., 1::2]
    y1 = x1 * cos - x2 * sin
    y2 = x2 if keep_second else x1 * sin + x2 * cos
    if pairs == "halves":
        return torch.cat([y1, y2], dim=-1)
    return torch.stack([y1, y2], dim=-1).flatten(-2)


def _rope_outputs(fn: Callable[..., Tensor], x: Inputs) -> dict[str, Tensor]:
    """What the check records for a rope function: its output and the score drift."""
    q, k, pos = x.args["x"], x.extra["keys"], x.args["positions"]
    out = fn(q, pos)
    return {"output": out, DRIFT: scores(fn(q, pos + SHIFT), fn(k, pos + SHIFT)) - scores(out, fn(k, pos))}


def _base(x: Inputs) -> float:
    return x.kwargs.get("base", 10000.0)


def _rope_reference(x: Inputs, spec: Spec) -> dict[str, Any]:
    out = rope(x.args["x"], x.args["positions"], _base(x))
    L = out.shape[-2]
    return {"output": out, DRIFT: torch.zeros(*out.shape[:-2], L, L, dtype=torch.float64)}


ROPE_BUGS: dict[str, tuple[str, Callable[[Inputs], Callable[..., Tensor]]]] = {
    "interleaved": (
        "You rotate neighbouring pairs (x[..., 0::2], x[..., 1::2]): this exercise pairs the halves, feature i "
        "with feature i + D/2 (x1 = x[..., :D/2], x2 = x[..., D/2:]), and writes the rotated halves back in place.",
        lambda x: lambda t, p: rope(t, p, _base(x), pairs="interleaved")),
    "positions from 1": (
        "Your angles are those of positions + 1: the token at position p is rotated by p·θ_i, so position 0 "
        "is not rotated at all. Use the positions you are given, as they are.",
        lambda x: lambda t, p: rope(t, p + 1, _base(x))),
    "positions ignored": (
        "You rotate by 0, 1, ..., L-1 whatever the positions: use the `positions` argument (a window further "
        "into a sequence, or any order).",
        lambda x: lambda t, p: rope(t, torch.arange(t.shape[-2]), _base(x))),
    "other direction": (
        "You rotate the other way: x1' = x1·cos - x2·sin and x2' = x1·sin + x2·cos.",
        lambda x: lambda t, p: rope(t, p, _base(x), sign=-1.0)),
    "exponent without 2": (
        "Your frequencies are base^(-i/D): they are θ_i = base^(-2i/D) for i = 0, ..., D/2 - 1 (the step "
        "is 2/D, as in the sinusoidal encoding of chapter 06).",
        lambda x: lambda t, p: rope(t, p, _base(x), exponent=1.0)),
    "exponent over D/2": (
        "Your frequencies are base^(-2i/(D/2)) = base^(-4i/D): the exponent divides by the whole width D, "
        "θ_i = base^(-2i/D) for i = 0, ..., D/2 - 1 (or base^(-j/D) for the even j = 0, 2, ..., D - 2).",
        lambda x: lambda t, p: rope(t, p, _base(x), exponent=4.0)),
    "base ignored": (
        "You ignore the `base` argument: θ_i = base^(-2i/D) with the base you are given (10000 only by default).",
        lambda x: lambda t, p: rope(t, p)),
    "one half rotated": (
        "Only the first half of each pair changes: rotate x1 and x2 together, x1' = x1·cos - x2·sin and "
        "x2' = x1·sin + x2·cos. Otherwise the scores q·k change when every position moves by the same amount "
        "(the score drift is not 0).",
        lambda x: lambda t, p: rope(t, p, _base(x), keep_second=True)),
}


def _rope_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    found = {}
    for name, (hint, make) in ROPE_BUGS.items():
        if name == "base ignored" and "base" not in x.kwargs:
            continue
        found[name] = Mistake(hint, _rope_outputs(make(x), x))
    return found


# --------------------------------------------------------------------------
# alibi_bias


def alibi(H: int, L: int, S: int, *, slopes: str = "paper", offset: bool = True, distance: str = "signed") -> Tensor:
    """(H, L, S) float64: bias[h, i, j] = -m_h * (i + S - L - j), m_h = 2^(-8 (h + 1) / H).

    The keyword arguments make the known mistakes."""
    h = torch.arange(1, H + 1, dtype=torch.float64)
    m = {"paper": 2 ** (-8 * h / H), "reversed": (2 ** (-8 * h / H)).flip(0), "from 0": 2 ** (-8 * (h - 1) / H),
         "eight heads": 2 ** -h}[slopes]
    i = torch.arange(L, dtype=torch.float64)[:, None] + (S - L if offset else 0)  # the queries' positions
    j = torch.arange(S, dtype=torch.float64)[None, :]  # the keys' positions
    d = {"signed": i - j, "absolute": (i - j).abs(), "negated": j - i}[distance]
    return -m[:, None, None] * d  # (H, L, S)


def _alibi_reference(x: Inputs, spec: Spec) -> dict[str, Any]:
    return dict(bias=alibi(*x.args.values()))


def _alibi_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    H, L, S = x.args.values()
    bugs = {
        "reversed": ("Your slopes go round the heads the wrong way: head 0 gets the LARGEST slope, 2^(-8/H), "
                     "and head H-1 the smallest, 2^(-8) (Press et al.: for 8 heads 1/2, 1/4, ..., 1/256).",
                     dict(slopes="reversed")),
        "from 0": ("Your first head has slope 1: the slopes are 2^(-8·1/H), 2^(-8·2/H), ..., 2^(-8·H/H), "
                   "counting the heads from 1 in the exponent.", dict(slopes="from 0")),
        "eight heads": ("Your slopes do not depend on the number of heads: 1/2, 1/4, 1/8, ... are the slopes of 8 "
                        "heads only; with H heads they are 2^(-8·1/H), 2^(-8·2/H), ..., 2^(-8·H/H) (always "
                        "ending at 2^(-8)).", dict(slopes="eight heads")),
        "negated": ("Your bias has the wrong sign: it is -m·(i - j), negative for the keys before the query, "
                    "so that distant keys lose weight.", dict(distance="negated")),
        "no offset": ("With S > L the queries are the LAST L of the S positions (as when generating with "
                      "cached keys): query i is at position i + S - L.", dict(offset=False)),
        "absolute": ("Your bias is -m·|i - j|: the contract is -m·(i - j) for every key, so keys after the "
                     "query get a positive bias (the causal mask removes them).", dict(distance="absolute")),
        "keys only": ("Your bias is m·(j - c) for some c (as BLOOM's code writes it): it differs from -m·(i - j) "
                      "by a constant in each row, which the softmax does not see, but the contract asks for "
                      "-m·(i - j) itself.", None),
    }
    found = {}
    for name, (hint, options) in bugs.items():
        if name == "keys only":  # m·j and m·(j - (S - 1)) both pass the softmax, neither the values
            for shift in (0, S - 1):
                found[f"{name} {shift}"] = Mistake(hint, dict(bias=_keys_only(H, L, S, shift)))
            continue
        found[name] = Mistake(hint, dict(bias=alibi(H, L, S, **options)))
    return found  # one query (L = 1): "no offset" is BLOOM's m·j, and the judge names both


def _keys_only(H: int, L: int, S: int, shift: int) -> Tensor:
    """m·(j - shift) for every query row: BLOOM's bias (shift 0), or one that is 0 at the last key."""
    m = alibi(H, 1, 2)[:, 0, 0]  # -m·(1 - 0) = -m
    j = torch.arange(S, dtype=torch.float64)
    return (-m)[:, None, None] * (j - shift).expand(L, S)


# --------------------------------------------------------------------------
# next_token_distribution and sample_next


def _renormalised(probs: Tensor) -> Tensor:
    return probs / probs.sum(-1, keepdim=True)


def keep_top_k(probs: Tensor, k: int, renormalise: bool = True, one_too_few: bool = False) -> Tensor:
    """Zero all but the k most probable tokens of each row (one_too_few: the known mistake that
    keeps only those above the k-th, k - 1 of them)."""
    k = min(k, probs.shape[-1])
    threshold = probs.topk(k, dim=-1).values[..., -1:]  # (..., 1): the k-th largest probability
    kept = torch.where(probs > threshold if one_too_few else probs >= threshold, probs, torch.zeros_like(probs))
    return _renormalised(kept) if renormalise else kept


def keep_top_p(probs: Tensor, p: float, renormalise: bool = True, one_too_few: str = "") -> Tensor:
    """The nucleus: the most probable tokens, in order, until their probabilities sum to p or more.

    A token is kept when the tokens more probable than it sum to less than p (so the first is
    always kept). one_too_few="kept first" / "none kept" make the known off-by-one mistake."""
    ordered, order = probs.sort(dim=-1, descending=True)  # (..., V)
    through = ordered.cumsum(dim=-1)  # the sum up to and including each token
    keep = through - ordered < p
    if one_too_few:
        keep = through < p  # stops before the token that reaches p
        if one_too_few == "kept first":
            keep[..., 0] = True
    kept = torch.zeros_like(probs).scatter(-1, order, ordered * keep)
    return _renormalised(kept) if renormalise else kept


def distribution(logits: Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                 bug: str = "") -> Tensor:
    """softmax(logits / temperature), then top-k, then top-p, each renormalised; `bug` makes a known mistake."""
    if bug == "temperature after softmax":
        probs = _renormalised(logits.softmax(-1) / temperature)
    elif bug == "temperature multiplied":
        probs = (logits * temperature).softmax(-1)
    else:
        probs = (logits / temperature).softmax(-1)  # (..., V)
    if bug == "top-p first" and top_p is not None:
        probs = keep_top_p(probs, top_p)
        return probs if top_k is None else keep_top_k(probs, top_k)
    if top_k is not None:
        probs = keep_top_k(probs, top_k, renormalise=bug != "not renormalised", one_too_few=bug == "top-k one too few")
    if top_p is not None:
        probs = keep_top_p(probs, top_p, renormalise=bug != "not renormalised",
                           one_too_few=bug.removeprefix("top-p one too few, ") if bug.startswith("top-p one") else "")
    if bug == "sorted order":  # the filtering done on sorted probabilities, never put back in the tokens' order
        probs = probs.sort(dim=-1, descending=True).values
    return probs


def _filters(x: Inputs) -> dict[str, Any]:
    return {k: x.kwargs[k] for k in ("temperature", "top_k", "top_p")}


DISTRIBUTION_BUGS = {
    "temperature after softmax": "Your temperature has no effect: divide the LOGITS by the temperature before the "
                                 "softmax (dividing the probabilities afterwards is undone when they are renormalised).",
    "temperature multiplied": "Your temperature works the wrong way round: divide the logits by it (a temperature "
                              "below 1 sharpens the distribution, above 1 flattens it).",
    "top-p one too few, kept first": "Your top-p keeps one token too few: keep tokens, most probable first, until "
                                     "their sum REACHES top_p, including the token that crosses it (a token is kept "
                                     "when the tokens before it sum to less than top_p).",
    "top-p one too few, none kept": "Your top-p keeps one token too few: keep tokens, most probable first, until "
                                    "their sum REACHES top_p, including the token that crosses it (a token is kept "
                                    "when the tokens before it sum to less than top_p).",
    "top-k one too few": "Your top-k keeps k - 1 tokens: keep every token whose probability is at least the k-th "
                         "largest (probs >= topk(k).values[..., -1:]), the k-th included.",
    "sorted order": "Your probabilities are in sorted order (most probable first), not in the tokens' order: "
                    "entry v of a row must be token v's probability; put the filtered sorted probabilities back "
                    "in place with scatter(-1, order, ...) (order: the indices sort returns).",
    "not renormalised": "Your probabilities do not sum to 1 after filtering: divide what top-k and top-p keep by "
                        "its sum.",
    "top-p first": "Apply the filters in the contract's order: temperature, then top-k, then top-p on the "
                   "distribution that top-k kept (renormalised).",
}


def _distribution_reference(x: Inputs, spec: Spec) -> dict[str, Any]:
    return dict(probs=distribution(x.args["logits"], **_filters(x)))


def _distribution_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    # (where two mistakes give the same probabilities, the judge names both)
    return {bug: Mistake(hint, dict(probs=distribution(x.args["logits"], **_filters(x), bug=bug)))
            for bug, hint in DISTRIBUTION_BUGS.items()}


def _draw(probs: Tensor, x: Inputs) -> Tensor | None:
    """The tokens torch.multinomial draws from probs with the case's generator (None: not a distribution)."""
    if not bool(torch.isfinite(probs).all()) or bool((probs.sum(-1) <= 0).any()):
        return None
    return torch.multinomial(probs, 1, generator=sampling_generator(x)).squeeze(-1)  # (N,)


def _sample_reference(x: Inputs, spec: Spec) -> dict[str, Any]:
    return dict(tokens=_draw(distribution(x.args["logits"], **_filters(x)), x))


# A distribution's mistake seen in sample_next's tokens lives where sample_next makes its distribution:
# named there (issue 59: a mistake is named in the tests of the function that has it)
IN_THE_DISTRIBUTION = ("Your tokens are draws from a distribution with this mistake (in next_token_distribution, "
                       "if your sample_next draws from it): ")


def _sample_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    logits, filters = x.args["logits"], _filters(x)
    found = {bug: Mistake(IN_THE_DISTRIBUTION + hint, dict(tokens=_draw(distribution(logits, **filters, bug=bug), x)))
             for bug, hint in DISTRIBUTION_BUGS.items()
             if bug not in ("not renormalised", "top-p one too few, none kept")}  # renormalised; a crash (below)
    found["argmax"] = _of_sample_next("You take the most probable token: draw one with torch.multinomial(probs, 1, "
                                      "generator=generator) from next_token_distribution's probabilities.",
                                      dict(tokens=distribution(logits, **filters).argmax(-1)))
    # (also what top_k passed where top_p goes gives, top_p None: a top-p of 1 or more keeps every token)
    found["filters ignored"] = _of_sample_next("Your tokens are drawn from the plain softmax of the logits, unfiltered: "
                                               "draw from next_token_distribution(logits, temperature, top_k, top_p), "
                                               "its arguments in this order.",
                                               dict(tokens=_draw(logits.softmax(-1), x)))
    found["generator ignored"] = _not_the_generators_draws(distribution(logits, **filters))  # last: the others first
    return found


def _of_sample_next(hint: str, outputs: dict[str, Any]) -> Mistake:
    """A mistake of sample_next's own drawing: its tokens are also what a next_token_distribution
    that is wrong the same way gives (top-k taken from the wrong end keeps the most probable token
    alone: argmax draws), so where the grader saw that function fail its own tests, the hint says
    so instead."""
    return Mistake(hint, outputs, depends=Depends(
        ("next_token_distribution",), hint,
        "sample_next draws from its probabilities, so tokens that differ may come from there. Fix what those "
        "tests' hints say first."))


def _not_the_generators_draws(probs: Tensor) -> Mistake:
    """Tokens that the right distribution could give, but not the case generator's draws: drawn with
    another random source (no generator, torch.manual_seed, Categorical(...).sample()) or another way
    (an inverse CDF of torch.rand)."""
    return Mistake("Your tokens are possible draws from the right distribution, but not the ones "
                   "torch.multinomial(probs, 1, generator=generator) draws: pass the generator you are given to "
                   "torch.multinomial (no draw without it, no torch.manual_seed, no Categorical(...).sample(), no "
                   "torch.rand of your own), so that the same generator gives the same tokens.",
                   dict(tokens=None), fits=Fit("possible_draws", dict(probs=probs)))


# --------------------------------------------------------------------------
# beam_search


def beam(step_fn: Callable[[Tensor], Tensor], start: int, beam_size: int, max_len: int, eos: int, *,
         normalise: bool = True, stop_at_eos: bool = True, count_start: bool = False, count_eos: bool = True,
         refill: str = "") -> tuple[Tensor, float]:
    """Beam search as the contract says: keep the beam_size best extensions by total log-probability;
    a kept one that ends with eos is finished and leaves the beam; at the end the best of the finished
    and the still active ones by total / (number of generated tokens). Returns (tokens without start,
    that score). The keyword arguments make the known mistakes."""
    active: list[tuple[list[int], float]] = [([start], 0.0)]  # (tokens with start, total log-probability)
    finished: list[tuple[list[int], float]] = []
    for _ in range(max_len):
        if not active:
            break
        logp = step_fn(torch.tensor([seq for seq, _ in active]))  # (N, V)
        V = logp.shape[-1]
        total = torch.tensor([score for _, score in active], dtype=torch.float64)[:, None] + logp  # (N, V)
        best = total.flatten().sort(descending=True)
        extended = [(active[i // V][0] + [i % V], score) for score, i in zip(best.values.tolist(), best.indices.tolist())]
        ends = lambda c: stop_at_eos and c[0][-1] == eos  # noqa: E731
        if refill == "ranked":  # Hugging Face's: finished if among the best beam_size, the beam refilled
            finished += [c for c in extended[:beam_size] if ends(c)]
            active = [c for c in extended if not ends(c)][:beam_size]
        elif refill == "until full":  # every finished one met on the way down, until the beam is full again
            kept = [c for c in extended if not ends(c)][:beam_size]
            last = extended.index(kept[-1]) if len(kept) == beam_size else len(extended)
            finished += [c for c in extended[:last] if ends(c)]
            active = kept
        else:
            finished += [c for c in extended[:beam_size] if ends(c)]
            active = [c for c in extended[:beam_size] if not ends(c)]

    def final(candidate: tuple[list[int], float]) -> float:
        seq, total = candidate
        length = len(seq) - (0 if count_start else 1) - (0 if count_eos or seq[-1] != eos else 1)
        if not normalise:
            return total
        return total / length if length else NEG_INF  # only eos: a length of 0 (-inf, as total / 0 in PyTorch)

    seq, total = max(finished + active, key=final)
    return torch.tensor(seq[1:]), final((seq, total))


def _beam_args(x: Inputs) -> tuple:
    return (ToyLM(x.extra["state"]), *list(x.args.values())[1:])


def _beam_reference(x: Inputs, spec: Spec) -> dict[str, Any]:
    tokens, score = beam(*_beam_args(x))
    return dict(tokens=tokens, score=score)


REFILLED = ("Your beam is refilled to beam_size hypotheses when some finish (the convention of Hugging Face's "
            "generate, which keeps the best unfinished extensions): this exercise's contract keeps the beam_size "
            "best extensions of all hypotheses, and those that end with eos leave the beam, which then holds fewer.")
BEAM_BUGS = {
    "not normalised": ("Your choice is not length-normalised: pick the hypothesis with the best total "
                       "log-probability DIVIDED BY its number of generated tokens (the sum alone favours short "
                       "sequences), and return that normalised score.", dict(normalise=False)),
    "eos keeps growing": ("Your hypotheses go on after EOS: a kept hypothesis that ends with eos is finished; it "
                          "leaves the beam and is never extended again.", dict(stop_at_eos=False)),
    "start counted": ("Your length counts the start token: normalise by the number of GENERATED tokens (eos "
                      "included, start not).", dict(count_start=True)),
    "eos not counted": ("Your length leaves out the end token: normalise by the number of GENERATED tokens, eos "
                        "included (start not).", dict(count_eos=False)),
    "greedy": ("Your result is greedy decoding's: keep the beam_size best extensions of ALL hypotheses at every "
               "step, not only the best one.", dict()),
    "refilled": (REFILLED, dict(refill="ranked")),
    "refilled until full": (REFILLED, dict(refill="until full")),
}


def _beam_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    found = {}
    step_fn, start, beam_size, max_len, eos = _beam_args(x)
    for name, (hint, options) in BEAM_BUGS.items():
        tokens, score = beam(step_fn, start, 1 if name == "greedy" else beam_size, max_len, eos, **options)
        found[name] = Mistake(hint, dict(tokens=tokens, score=score))
    tokens = expected["tokens"]
    found["start kept"] = Mistake("Return the generated tokens without the start token.",
                                  dict(tokens=torch.cat([torch.tensor([start]), tokens])))
    return found


ANSWERS = {
    "apply_rope": Answer(_rope_reference, _rope_mistakes),
    "alibi_bias": Answer(_alibi_reference, _alibi_mistakes),
    "next_token_distribution": Answer(_distribution_reference, _distribution_mistakes),
    # the generator decides every case's draws: tokens drawn another way earn nothing for their shape
    "sample_next": Answer(_sample_reference, _sample_mistakes, structure_share=0.0),
    "beam_search": Answer(_beam_reference, _beam_mistakes),
}
