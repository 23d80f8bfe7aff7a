"""Localising a mistake by experiment: the judging side (issue 59, items 1 to 3).

The kernel ran a failed name's ladder of small cases (``attention_checks.localise``: a base case
and axes of rungs, each one thing away from the rung below it) and recorded what the student's
code returned; the judge (``judging``) says which rungs were right, by the references it computes
itself, and only for a name that failed. This module turns that into words:

* **along an axis** (item 1): the first rung whose verdict differs from the rung below it: "right
  with one block of keys; wrong with two blocks of keys (look at the step that combines blocks of
  keys)". Both verdicts are observed; the words of the rungs and of the part they exercise are the
  check's declaration, so the finding is a pick among a few, which a sealed report may show.
* **inside a module** (item 2): the base case's recorded submodule inputs and outputs against the
  reference's. Where the reference is a PyTorch module with the same submodules (a post-norm
  layer, a stack's ``layers.0``, a Transformer's encoder and decoder), against its own, recorded
  the same way: the first step whose output differs, and which of its inputs (query, key, value)
  differ. Else, for a chain of projections: a projection fed something other than the module's
  input, the heads merged before the output projection (the reference's, solved from its output
  through that projection's weight), which heads differ, and what the module does after it.
* **inside a function** (item 2): the code's PyTorch calls, recorded in the first case it gets
  wrong, against every value the reference computes there, its fused operations written out: the
  first line whose result the reference never holds, and from which nothing right is made.
* **a relation to the reference's output**, checked on the numbers: the code's output on the
  smallest case is the reference's plus the input (a residual), or the reference's normalised
  (a final norm). Said only where it holds; a symptom alone never says it.
* **when it is shown** (item 3): ``judging`` puts the finding under the failing cases that no
  verified diagnosis explains; a case whose catalogued diagnosis survived its check keeps it alone.

A finding says where the outputs go wrong, never why: it holds for mistakes nobody listed.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

import torch

from ..core import quiet, tolerance
from ..localise import MOST_ITEMS, Axes, Axis, Call, CallRecorder, Ladder, Seen, StepRecorder, _tensors_in
from ..record import Outcome

if TYPE_CHECKING:
    from .judging import Judged

# a localising case by its index among Axes.cases(), as the judge sees it, and the reference run on it
At = Callable[[int], "tuple[Judged, Callable[[], Any]]"]
MOST_FINDINGS = 2  # axes named in one finding; more would not fit a hint
LEAD = "Tried on small cases that differ in one thing at a time: "
STEP_BY_STEP = "The smallest case, step by step against the reference: "
RELATED = "The smallest case against the reference: "


_DOWNWARD = "\x00"  # marks a finding of a downward axis until the words are joined


def _change(axis: Axis, lower: str, rung: str, lower_right: bool) -> str:
    """A verdict that changes between two rungs, in words: with where to look when the simpler of
    the two is the right one (what the other adds is then where the outputs go wrong); else only
    what was seen (what the simpler rung leaves out hides the mistake, wherever it is)."""
    simpler_right = lower_right != axis.downward
    good, bad = (lower, rung) if lower_right else (rung, lower)
    if simpler_right:
        return f"right with {good}; wrong with {bad} (look at {axis.where})"
    return f"wrong with {bad}, yet right with {good}"


def along_axes(axes: Axes, right: Sequence[bool | None]) -> str | None:
    """The finding from the rungs' verdicts (``right[i]``: case i of ``axes.cases()`` was right;
    None: not known, e.g. not run), or None where the ladder shows nothing. Along each axis, the
    first rung whose verdict differs from the rung below it; an axis whose rung also changes every
    key of a rung already named (causal over two blocks, after two blocks) adds nothing and is left out."""
    found: list[str] = []
    named: list[set[str]] = []  # the keys each named rung changes
    for axis in axes.axes:
        below, lower = 0, axis.said
        for index, step in axes.numbered(axis):
            if index >= len(right) or right[index] is None or right[below] is None:
                break
            if right[below] != right[index]:
                keys = set(step.changes)
                if not any(keys >= earlier for earlier in named):
                    named.append(keys)
                    found.append(_change(axis, lower, step.said, right[below]) + (_DOWNWARD if axis.downward else ""))
                break
            below, lower = index, step.said
    if len(found) > 1:  # a downward rung says less than any other (position 0 alone: no rotation at all)
        found = [text for text in found if not text.endswith(_DOWNWARD)] or found[:1]
    if found:
        more = len(found) - MOST_FINDINGS
        found = [text.removesuffix(_DOWNWARD) for text in found]
        return LEAD + "; and ".join(found[:MOST_FINDINGS]) + (f"; and along {more} more axis(es)" if more > 0 else "") + "."
    known = [r for r in right if r is not None]
    if len(known) > 1 and not any(known):
        simplest = [step.said for axis in axes.axes if axis.downward for step in axis.steps]
        even = f" ({', '.join(simplest)})" if simplest else ""
        return (LEAD + f"wrong in every one, the simplest included{even}: the mistake is in what every case does, "
                "not in what they vary.")
    return None


# --------------------------------------------------------------------------
# inside a module: the first step that differs (item 2)


def _agree(got: Any, expected: torch.Tensor, dtype: torch.dtype) -> bool:
    return (isinstance(got, torch.Tensor) and tuple(got.shape) == tuple(expected.shape)
            and torch.allclose(got.to(torch.float64), expected.to(torch.float64), **tolerance(dtype)))


def _merged_heads(output: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor | None:
    """What the output projection's input must be for it to give ``output``: solved through its
    (square, invertible) weight; None where the weight is not square."""
    if weight.dim() != 2 or weight.shape[0] != weight.shape[1]:
        return None
    target = output - (bias if bias is not None else 0.0)
    return torch.linalg.solve(weight, target.unsqueeze(-1)).squeeze(-1)  # x W^T = y  <=>  W x = y


def _heads_that_differ(got: torch.Tensor, expected: torch.Tensor, heads: int, dtype: torch.dtype) -> list[int]:
    width = expected.shape[-1] // heads
    return [h for h in range(heads)
            if not _agree(got[..., h * width:(h + 1) * width], expected[..., h * width:(h + 1) * width], dtype)]


def inside_module(axes: Axes, ladder: Ladder, base: "Judged") -> str | None:
    """The first step of a module's computation whose recorded value differs from the reference's,
    on the base case (``base``: its judged form): ``axes.steps`` in order, the last the output
    projection, whose input is the heads merged (the reference's solved through its weight)."""
    if not axes.steps or not ladder.steps or not ladder.outcomes:
        return None
    x, dtype, expected = base.x, base.dtype, next(iter(base.expected.values()))
    state = x.extra.get("state") or {}
    _, module_input = _first_input(base)
    *inner, (last, last_said) = axes.steps
    for name, said in inner:
        if name not in ladder.steps:
            return f"{said} ({name}) is never called: look at where you project."
        if module_input is not None and not _agree(ladder.steps[name].first(), module_input, dtype):
            return f"{said} ({name}) is not given the module's input: look at what you pass to {name}."
    if last not in ladder.steps and ladder.outcomes[0].error is None:
        before = f"{', '.join(said for _, said in inner)} are given the module's input; " if inner else ""
        return f"{before}{last_said} ({last}) is never called as a module: look at what your forward returns."
    if last not in ladder.steps or f"{last}.weight" not in state or not isinstance(expected, torch.Tensor):
        return None
    given, made = ladder.steps[last].first(), ladder.steps[last].made
    merged = _merged_heads(expected, state[f"{last}.weight"], state.get(f"{last}.bias"))
    if merged is None:
        return None
    if not _agree(given, merged, dtype):
        before = (f"{', '.join(said for _, said in inner)} are given the module's input; " if inner else "")
        text = (f"{before}what {last} is given (the attention's output, its heads merged) differs from the "
                f"reference's: the mistake lies before {last_said} ({last}): in splitting the heads, the scores, "
                "the weights, or merging the heads")
        heads = next((base.spec[key] for key in ("num_heads", "H", "nhead") if isinstance(base.spec.get(key), int)), None)
        if isinstance(heads, int) and heads > 1 and given.shape == merged.shape:
            differ = _heads_that_differ(given, merged, heads, dtype)
            if 0 < len(differ) < heads:
                right = [h for h in range(heads) if h not in differ]
                text += (f"; right for head{'s' * (len(right) > 1)} {', '.join(map(str, right))}, wrong for "
                         f"head{'s' * (len(differ) > 1)} {', '.join(map(str, differ))}")
        return text + "."
    got = _output(ladder.outcomes[0].value)
    if isinstance(got, torch.Tensor) and not _agree(got, made, dtype):
        return f"everything up to {last_said} ({last}) is right; your forward changes {last}'s output before it returns it."
    return None


def reference_steps(axes: Axes, run_reference: Callable[[], Any]) -> dict[str, Seen]:
    """The named submodules' inputs and output while the reference runs on the base case, in the order
    they were first called: where the reference is a PyTorch module of the same names
    (nn.TransformerEncoderLayer's self_attn, norm1, linear1, ...); {} where it calls none (a
    functional reference, or one that skips its submodules' forward)."""
    recorder = StepRecorder([name for name, _ in axes.steps])
    try:
        with quiet(), torch.no_grad(), recorder:
            run_reference()
    except Exception:  # noqa: BLE001 - no steps to compare with
        return {}
    return recorder.seen


def steps_compared(axes: Axes, ladder: Ladder, expected: Mapping[str, Seen], base: "Judged") -> str | None:
    """The first step, in the reference's order, whose output differs from the reference's: given other
    values (its input differs), or giving other values from the same input, or never called; where
    every step is right, what the module does after them (``after_the_steps``)."""
    said, dtype = dict(axes.steps), base.dtype
    right: list[str] = []
    for name, reference in expected.items():
        if name not in ladder.steps:
            raised = ladder.outcomes[0].error is not None
            return (f"the case raised before {said[name]} ({name}) returned" if raised else
                    f"{said[name]} ({name}) is never called as a module") + _after(right) + "."
        student = ladder.steps[name]
        if not _agree(student.made, reference.made, dtype):
            return f"{said[name]} ({name}) {_how_a_step_differs(name, student, reference, dtype)}" + _after(right) + "."
        right.append(f"{said[name]} ({name})")
    return f"every step is right ({', '.join(right)}); {after_the_steps(ladder, base)}" if right else None


def _how_a_step_differs(name: str, student: Seen, reference: Seen, dtype: torch.dtype) -> str:
    """Why a step's output differs: which of its inputs differ from the reference's (compared by the
    parameter they were passed as, where both calls name it), or none of them."""
    shared = [key for key in reference.given if key in student.given]
    differ = [key for key in shared if not _agree(student.given[key], reference.given[key], dtype)]
    if differ:
        inputs = " and ".join(differ)
        return (f"is given other values than the reference's (its {inputs} differ{'s' * (len(differ) == 1)}): "
                "look at what you pass to it")
    if len(shared) == len(reference.given):
        return f"gives other values than the reference's from the same inputs: look at {name} itself"
    return f"gives other values than the reference's: look at what you pass to {name}, and at {name} itself"


def after_the_steps(ladder: Ladder, base: "Judged") -> str:
    """What a module whose every recorded step is right does after them: a relation between its
    output and the reference's, checked on the base case (``output_relation``); else only that it
    differs there."""
    return output_relation(ladder, base, "your forward") or "what your forward does after them differs from the reference's."


def output_relation(ladder: Ladder, base: "Judged", who: str) -> str | None:
    """A relation between the code's output on the base case and the reference's that holds there,
    in words, or None: the reference's plus the first floating-point input (a residual the
    reference does not add), or the reference's normalised over its last axis. Both are checked
    on the numbers, never guessed from a symptom."""
    got, expected = _output(ladder.outcomes[0].value), next(iter(base.expected.values()), None)
    if not (isinstance(got, torch.Tensor) and isinstance(expected, torch.Tensor) and expected.is_floating_point()):
        return None
    name, given = _first_input(base)
    if given is not None and given.shape == expected.shape and _agree(got, expected + given, base.dtype):
        return (f"your output is the reference's plus the input {name}: {who} adds a residual the reference does "
                "not have.")
    if expected.dim() > 0 and expected.shape[-1] > 1 and \
            _agree(got, torch.nn.functional.layer_norm(expected, expected.shape[-1:]), base.dtype):
        return (f"your output is the reference's normalised over its last axis (mean 0, variance 1): {who} "
                "applies a final norm that the reference does not.")
    return None


def _first_input(base: "Judged") -> tuple[str | None, torch.Tensor | None]:
    """The base case's first floating-point argument (a module's input: src, tgt, x), by name."""
    return next(((name, value) for name, value in base.x.args.items()
                 if isinstance(value, torch.Tensor) and value.is_floating_point()), (None, None))


def _output(value: Any) -> Any:
    """A module's output from what its call returned (an attention's (output, weights): the output)."""
    return value[0] if isinstance(value, (tuple, list)) and value else value


def _after(right: Sequence[str]) -> str:
    if not right:
        return " (the first step)"
    return f" (before it, {' and '.join(right) if len(right) < 3 else ', '.join(right)} {'is' if len(right) == 1 else 'are'} right)"


# --------------------------------------------------------------------------
# inside a function: the first call whose result the reference never computes (item 2)


class ReferenceRecorder(CallRecorder):
    """The reference's calls, each fused operation also written out (``written_out``): a softmax is
    also its maximum, its shifted scores, their exponentials and sums, so that code which writes
    it out step by step meets the reference's values at every step."""

    def __init__(self):
        super().__init__(lines=False, most_calls=100_000, most_elements=10**8)  # the grader's own: all of it

    def __torch_function__(self, func, types, args=(), kwargs=None):
        made = super().__torch_function__(func, types, args, kwargs)
        try:
            steps = written_out(getattr(func, "__name__", ""), args, kwargs or {})
        except Exception:  # noqa: BLE001 - arguments of another form: the fused call alone
            steps = []
        self.calls += [Call(step.detach().clone(), getattr(func, "__name__", "")) for step in steps]
        return made


def _softmax_steps(scores: torch.Tensor, dim: int) -> list[torch.Tensor]:
    shifted = scores - scores.amax(dim, keepdim=True)
    steps = [scores.amax(dim, keepdim=True), shifted]
    for exps in (shifted.exp(), scores.exp()):
        steps += [exps, exps.sum(dim, keepdim=True), exps / exps.sum(dim, keepdim=True)]
    return steps


def _attention_steps(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                     enable_gqa=False) -> list[torch.Tensor]:
    if enable_gqa and k.dim() >= 3 and q.shape[-3] != k.shape[-3]:
        group = q.shape[-3] // k.shape[-3]
        k, v = k.repeat_interleave(group, dim=-3), v.repeat_interleave(group, dim=-3)
    scores = q @ k.transpose(-2, -1)
    scaled = scores * (scale if scale is not None else q.shape[-1] ** -0.5)
    L, S = scores.shape[-2:]
    if is_causal:
        attn_mask = torch.ones(L, S, dtype=torch.bool).tril()
    masked = scaled
    if attn_mask is not None:
        masked = scaled.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scaled + attn_mask
    weights = masked.softmax(-1)
    return [k.transpose(-2, -1), scores, scaled, masked, *_softmax_steps(masked, -1), weights @ v]


def _layer_norm_steps(x, normalized_shape, weight=None, bias=None, eps=1e-5) -> list[torch.Tensor]:
    dims = tuple(range(-len(normalized_shape), 0))
    mean = x.mean(dims, keepdim=True)
    centred = x - mean
    variance = centred.pow(2).mean(dims, keepdim=True)
    normalised = centred / (variance + eps).sqrt()
    steps = [mean, centred, centred.pow(2), variance, variance + eps, (variance + eps).sqrt(),
             (variance + eps).rsqrt(), normalised]
    return steps + ([normalised * weight] if weight is not None else [])


def written_out(name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[torch.Tensor]:
    """The values a fused PyTorch operation computes on the way, as code that writes it out meets
    them: softmax (its maximum, shifted scores, exponentials, their sums), layer_norm (mean,
    centred values, variance, ...), linear (the product before the bias) and
    scaled_dot_product_attention (the scores, scaled, masked, their softmax); [] for any other."""
    if name in ("softmax", "log_softmax"):
        dim = args[1] if len(args) > 1 else kwargs["dim"]
        return _softmax_steps(args[0], dim)
    if name == "layer_norm":
        return _layer_norm_steps(*args, **kwargs)
    if name == "linear":
        x, weight = args[0], args[1] if len(args) > 1 else kwargs["weight"]
        return [weight.transpose(-2, -1), x @ weight.transpose(-2, -1)]
    if name == "scaled_dot_product_attention":
        return _attention_steps(*args, **kwargs)
    return []


def reference_calls(run_reference: Callable[[], Any]) -> list[Call]:
    """The PyTorch calls the reference makes on a case, with what each one made, its fused
    operations written out (``ReferenceRecorder``); [] where it raises."""
    recorder = ReferenceRecorder()
    try:
        with quiet(), torch.no_grad(), recorder:
            run_reference()
    except Exception:  # noqa: BLE001 - nothing to compare with
        return []
    return recorder.calls


def varies(t: torch.Tensor) -> bool:
    """Whether a value has two entries at least, not all equal: one that can say where code is right
    (a single number or a constant matches too much by chance), or that took some work to make."""
    flat = t.reshape(-1)
    return flat.numel() >= 2 and not bool((flat == flat[0]).all())


def _merges(short: Sequence[int], long: Sequence[int]) -> bool:
    """Whether the axes ``long`` become ``short`` by merging runs of neighbours ((B, L, h, d) ->
    (B, L, h·d): heads split by a view); sizes of 1 are left out of both before."""
    i = 0
    for size in short:
        product = 1
        while product < size and i < len(long):
            product, i = product * long[i], i + 1
        if product != size:
            return False
    return i == len(long)


def _same_values(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> bool:
    """The same values in the same order, whatever axes of size 1 or neighbouring axes merged by a view
    tell them apart (never transposed: axes in another order are another value)."""
    if a.numel() != b.numel() or (a.dtype == torch.bool) != (b.dtype == torch.bool):
        return False
    short, long = [n for n in a.shape if n != 1], [n for n in b.shape if n != 1]
    if len(short) > len(long):
        short, long = long, short
    if not _merges(short, long):
        return False
    return torch.allclose(a.reshape(-1).to(torch.float64), b.reshape(-1).to(torch.float64), equal_nan=True,
                          **tolerance(dtype))


def _reference_values(case: "Judged", run_reference: Callable[[], Any]) \
        -> tuple[list[Call], list[torch.Tensor], list[torch.Tensor]]:
    """What the reference shows on a case: its steps (the values its calls make that are neither an
    input nor an output, each of more than one value), its outputs and the case's inputs."""
    reference = [call for call in reference_calls(run_reference) if varies(call.made)]
    outputs = [v for v in case.expected.values() if isinstance(v, torch.Tensor)]
    inputs = [v for v in (*case.x.args.values(), *case.x.kwargs.values()) if isinstance(v, torch.Tensor)]
    steps = [call for call in reference if not any(_same_values(call.made, v, case.dtype) for v in outputs + inputs)]
    return steps, outputs, inputs


def first_call_that_differs(calls: Sequence[Call], outcome: Outcome, case: "Judged",
                            run_reference: Callable[[], Any], given: Sequence[torch.Tensor] = ()) -> str | None:
    """Where a function's computation leaves the reference's, on one case: the values that each of
    the code's PyTorch calls made (``calls``; ``outcome``: what the code returned) against every
    value the reference computes on the same inputs (its calls, its inputs and its output). A
    call's result is right where the reference computes the same values, or where a later result
    made from it is right (another route to the same value: a softmax written out); the first call
    on the way to the output that is neither is where the results leave the reference's, and
    nothing made from it comes back; it is said with the line of code that made it, where the
    reference shows a step, an earlier call of the code makes one of the reference's values, or one
    change to that call makes them (``_first_line_said``, ``mended``; ``given``: the tensors the
    calls took that none of them made). Where the output itself is one of the reference's earlier
    values, that is said instead."""
    output = _output(outcome.value)
    if not calls or not isinstance(output, torch.Tensor):
        return None
    dtype = case.dtype
    steps, outputs, inputs = _reference_values(case, run_reference)
    made_output = [i for i, call in enumerate(calls) if call.made.shape == output.shape
                   and torch.equal(call.made.to(torch.float64).nan_to_num(), output.to(torch.float64).nan_to_num())]
    if not made_output or any(_same_values(output, v, dtype) for v in outputs):
        return None  # an output no call made
    earlier = next((call for call in steps if _same_values(output, call.made, dtype)), None)
    if earlier is not None:
        where = f" (in its {earlier.what})" if earlier.what else ""
        return (f"your output holds values the reference computes on its way{where}, before its output: the "
                "reference does more after them.")
    computed = _by_size([call.made for call in steps] + outputs)  # what the reference computes from the inputs
    end = made_output[-1]

    def in_place(value: torch.Tensor) -> int:  # the output's entries that are the reference's, in their places
        return max((int(torch.isclose(value.reshape(-1).to(torch.float64), v.reshape(-1).to(torch.float64),
                                      equal_nan=True, **tolerance(dtype)).sum())
                    for v in outputs if v.numel() == value.numel()), default=0)

    right_now = in_place(output)

    def closer(result: torch.Tensor) -> bool:  # of one number, nothing to count: a replay may miss Python's
        return output.numel() == 1 or in_place(result) > right_now  # arithmetic on sizes (x.numel() - 1)

    def mend(first: int) -> str | None:
        return mended(first, calls, given, computed, dtype, end, closer)

    def mend_earlier() -> tuple[int, str] | None:  # one change that makes the output the reference's
        return mended_earlier(calls, given, end, lambda t: any(_same_values(t, v, dtype) for v in outputs), dtype)
    return _first_line_said(calls, end, computed, _by_size(inputs), dtype, bool(steps), mend, mend_earlier)


def raised_line_mended(failed: Call, calls: Sequence[Call], given: Sequence[torch.Tensor], case: "Judged",
                       run_reference: Callable[[], Any]) -> str | None:
    """Where a case raised in one of the code's PyTorch calls (``failed``: the call, as recorded), and
    one change to that call lets it run and make values the reference computes on the same case
    (``mended``): the line, and that change; else None (the case's own report shows where it raised)."""
    if failed.line <= 0:
        return None
    steps, outputs, _ = _reference_values(case, run_reference)
    computed = _by_size([call.made for call in steps] + outputs)
    found = mended_earlier([*calls, failed], given, len(calls), lambda t: _known(t, computed, case.dtype), case.dtype)
    if found is None:
        return None
    at, change = found
    raises = f"{_where(failed)}{_quoted(failed)} raises"
    if at == len(calls):
        return f"{raises}; changed in one thing it runs and makes the reference's values: {change}."
    return (f"{raises}; with one change to {_line_of(calls[at], failed)} it runs and makes the reference's values: "
            f"{change}.")


def _by_size(values: Sequence[torch.Tensor]) -> dict[int, list[torch.Tensor]]:
    """Values by their number of entries: only values of the same number can hold the same values."""
    found: dict[int, list[torch.Tensor]] = {}
    for value in values:
        found.setdefault(value.numel(), []).append(value)
    return found


def _known(value: torch.Tensor, pool: Mapping[int, Sequence[torch.Tensor]], dtype: torch.dtype) -> bool:
    return any(_same_values(value, v, dtype) for v in pool.get(value.numel(), ()))


def _line_of(call: Call, said: Call) -> str:
    """A call's line, after another's has been said: "the same line", or the line with its text."""
    if call.line == said.line and call.within == said.within:
        return "the same line"
    return f"line {call.line}{_quoted(call)}"


def _first_line_said(calls: Sequence[Call], last: int, computed: Mapping[int, Sequence[torch.Tensor]],
                     given: Mapping[int, Sequence[torch.Tensor]], dtype: torch.dtype, shows_steps: bool,
                     mend: Callable[[int], str | None] = lambda first: None,
                     mend_earlier: Callable[[], tuple[int, str] | None] = lambda: None) -> str | None:
    """The first of ``calls`` that the output (made by calls[last]) is made from whose values are not
    the reference's (``computed`` from the inputs, or ``given``: the inputs themselves) and from which
    nothing that is comes; with the lines before it that made the reference's values, those that
    left theirs unchanged, and one change to it that makes the reference's values (``mend``). None
    where no call before it computes one of the reference's values, the reference shows no step
    either (``shows_steps``) and no change mends it (an opaque reference: a first line says nothing)."""
    informative = [varies(call.made) for call in calls]
    holds = [informative[i] and (_known(call.made, computed, dtype) or _known(call.made, given, dtype))
             for i, call in enumerate(calls)]
    leads_to_right = list(holds)  # a result from which a right one is made
    for i in reversed(range(len(calls))):
        if leads_to_right[i]:
            for j in calls[i].takes:
                leads_to_right[j] = True
    needed = {last}  # what the output is made from
    for i in reversed(range(last + 1)):
        if i in needed:
            needed.update(calls[i].takes)
    first = next((i for i in sorted(needed) if informative[i] and not leads_to_right[i]), None)
    # a change to the first wrong line that makes values the reference computes there, and brings the output
    # closer to the reference's where the calls after it can say (``mend``); else one change to a line the
    # output is made from that makes the output the reference's, run again through every call after it, which
    # cannot see what code out of the record's sight (a given model) would make of the change
    change = mend(first) if first is not None and calls[first].line > 0 else None
    earlier = None if change else mend_earlier()
    anchored = first is not None and any(i < first and informative[i] and _known(calls[i].made, computed, dtype)
                                         for i in needed)
    if first is None or calls[first].line <= 0 or not (anchored or shows_steps or change):
        # no line can be said to leave the reference's values (its input's values, in their order, are wrong
        # as an output); one change may still make the output the reference's
        if earlier is None or calls[earlier[0]].line <= 0:
            return None
        at, words = earlier
        return (f"{_where(calls[at])}{_quoted(calls[at])}, changed in one thing, makes your output the reference's: "
                f"{words}.")
    before = [i for i in sorted(needed) if i < first and calls[i].line not in (0, calls[first].line)]
    # the lines that left what they took as it was (a scale that is 1 in this case, where the reference's is not)
    unchanged = sorted({calls[i].line for i in before
                        if any(_same_values(calls[i].made, calls[j].made, dtype) for j in calls[i].takes)})
    # a line is said to be right only where nothing it made leaves the reference's values, a single number
    # included (one that cannot be judged: too many values equal it by chance)
    unsure = {calls[i].line for i in before if not leads_to_right[i]}
    right = sorted({calls[i].line for i in before if holds[i]} - set(unchanged) - unsure)
    said = [f"{_where(calls[first])}{_quoted(calls[first])} is the first to make values that the reference never "
            "computes, and nothing made from them comes back to the reference's."]
    if change:
        said.append(f"Changed in one thing, it makes the reference's values: {change}.")
    elif earlier is not None and calls[earlier[0]].line > 0:
        at, words = earlier
        said.append(f"With one change to {'it' if at == first else _line_of(calls[at], calls[first])}, your output "
                    f"is the reference's: {words}.")
    if right:
        said.append(f"Before it, line{'s' * (len(right) > 1)} {_lines(right)} make{'s' * (len(right) == 1)} the "
                    "reference's values.")
    if unchanged:
        said.append(f"Line{'s' * (len(unchanged) > 1)} {_lines(unchanged)} leave{'s' * (len(unchanged) == 1)} the "
                    f"values given to {'it' if len(unchanged) == 1 else 'them'} unchanged in this case.")
    return " ".join(said)


def _where(call: Call) -> str:
    """Where a call's line is: "line 4 of the cell that defines your `softmax`" (the numbers Jupyter
    shows beside a cell's lines), or of "your code" where its function is not known."""
    return f"line {call.line} of the cell that defines your `{call.within}`" if call.within \
        else f"line {call.line} of your code"


def _quoted(call: Call) -> str:
    return f" (`{call.code}`)" if call.code else ""


def _lines(numbers: Sequence[int]) -> str:
    shown = [str(n) for n in numbers[-3:]]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"


# --------------------------------------------------------------------------
# one change that mends a call: the call run again by the grader, changed in one thing


_CREATE = ("ones", "zeros", "full", "arange")  # tensors made from numbers alone (sized before they run)
_NEW = ("new_full", "new_zeros", "new_ones")  # the same, from a tensor's dtype and device
# the PyTorch operations the grader runs again, by the name a record gives them: pure functions of
# small tensors, none that reads or writes anything else (what each makes is bounded before it runs: ``_run``)
_RERUN: dict[str, Callable[..., Any]] = {
    **{name: getattr(torch.Tensor, name) for name in (
        "sum mean amax amin var std logsumexp prod cumsum transpose permute reshape view flatten "
        "unsqueeze squeeze chunk split unbind max min topk sort narrow matmul mm bmm add sub mul div exp log sqrt rsqrt pow masked_fill "
        "tril triu __getitem__ __rsub__ __rtruediv__ __radd__ __rmul__ __lt__ __le__ __gt__ __ge__ __eq__ __ne__ "
        "__and__ __or__ __xor__ logical_and logical_or logical_xor lt le gt ge eq ne __invert__ __rdiv__ neg "
        "logical_not argmax argmin gather roll flip clamp abs sin cos tanh sigmoid __floordiv__ floor_divide __rpow__ "
        "maximum minimum "
        "float double half long int bool").split() + list(_NEW)},
    "cat": torch.cat, "stack": torch.stack, "outer": torch.outer, "where": torch.where,
    **{name: getattr(torch, name) for name in _CREATE},
    # the functional forms take the keywords F passes on (softmax's _stacklevel, relu's inplace)
    **{name: getattr(torch.nn.functional, name) for name in ("softmax", "log_softmax", "relu", "gelu", "leaky_relu",
                                                               "silu")},
}
_ACTIVATIONS = ("relu", "gelu", "leaky_relu", "silu", "sigmoid", "tanh")
_LAYOUT = {"transpose", "permute", "reshape", "view", "flatten", "unsqueeze", "squeeze"}  # the values, in another shape
_REDUCTIONS = {"sum", "mean", "amax", "amin", "var", "std", "logsumexp", "prod"}
_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")  # == first: the one a mask most often means
# an operation one word or sign away from another, each tried in its place: the comparisons, + and -, * and /,
# sum and mean, the largest and the smallest, below and above the diagonal, one activation for another; the
# product that batches any leading axes for mm (2-D) and bmm (3-D)
_SIBLINGS = {
    **{op: [other for other in _COMPARISONS if other != op] for op in _COMPARISONS},
    "__eq__": [op for op in _COMPARISONS if op != "eq"], "__ne__": [op for op in _COMPARISONS if op != "ne"],
    "add": ["sub"], "sub": ["add"], "mul": ["div"], "div": ["mul"], "sum": ["mean"], "mean": ["sum"],
    "amax": ["amin"], "amin": ["amax"], "maximum": ["minimum"], "minimum": ["maximum"], "argmax": ["argmin"], "argmin": ["argmax"], "tril": ["triu"],
    "triu": ["tril"], "sin": ["cos"], "cos": ["sin"], "mm": ["matmul"], "bmm": ["matmul"],
    "__floordiv__": ["div"], "floor_divide": ["div"], "stack": ["cat"],
    # the logical operators: | for ^ (which lets through what both masks hide), & for |
    "__xor__": ["__or__", "__and__"], "__or__": ["__and__", "__xor__"], "__and__": ["__or__"],
    "logical_xor": ["logical_or", "logical_and"], "logical_or": ["logical_and"], "logical_and": ["logical_or"],
    **{name: [other for other in _ACTIVATIONS if other != name] for name in _ACTIVATIONS},
}
# operations said as the operator that wrote them: `… <= 5`
_OPERATORS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "__eq__": "==", "ne": "!=", "__ne__": "!=",
              "add": "+", "sub": "-", "mul": "*", "div": "/", "matmul": "@", "pow": "**", "__and__": "&", "__or__": "|",
              "__xor__": "^", "__floordiv__": "//", "floor_divide": "//"}
# what an operation does that its sign alone does not say, said where a change replaces it
_GLOSS = {"__floordiv__": "floor division, which rounds down", "floor_divide": "floor division, which rounds down",
          "__xor__": "exclusive or: true where exactly one is", "logical_xor": "exclusive or: true where exactly one is"}
_FUNCTIONS = {"cat", "stack", "outer", "where", *_CREATE}  # said as torch.<name>(...), not as a method
MOST_INTEGER = 4096  # an integer among recorded arguments that is run again (a dim, a size, a slice's bound)
MOST_MADE = 1 << 16  # entries of what a changed call may make


class _Malformed(ValueError):
    """A recorded argument that is not what ``CallRecorder._argument`` writes."""


def _rebuilt(data: Any, made: Sequence[torch.Tensor], given: Sequence[torch.Tensor], depth: int = 0) -> Any:
    """A recorded argument as the value it was: a tensor from the call that made it or from the
    given ones, plain numbers, slices, Ellipsis and short sequences of them; _Malformed otherwise."""
    if not isinstance(data, dict) or len(data) > 2 or depth > 4:
        raise _Malformed
    if "call" in data or "given" in data:
        index, pool = (data["call"], made) if "call" in data else (data["given"], given)
        if not isinstance(index, int) or not 0 <= index < len(pool):
            raise _Malformed
        return pool[index]
    if "plain" in data:
        value = data["plain"]
        if isinstance(value, str) and len(value) > 20 or not isinstance(value, (bool, int, str, type(None))) \
                or isinstance(value, int) and abs(value) > MOST_INTEGER:
            raise _Malformed
        return value
    if "float" in data:
        return float(str(data["float"])[:40])
    if data.get("ellipsis") is True:
        return Ellipsis
    if "dtype" in data:
        dtype = getattr(torch, str(data["dtype"])[:20], None) if str(data["dtype"]).isidentifier() else None
        if not isinstance(dtype, torch.dtype):
            raise _Malformed
        return dtype
    if isinstance(data.get("slice"), list) and len(data["slice"]) == 3:
        parts = [_rebuilt(part, made, given, depth + 1) for part in data["slice"]]
        if not all(part is None or type(part) is int for part in parts):
            raise _Malformed
        return slice(*parts)
    if isinstance(data.get("sequence"), list) and len(data["sequence"]) <= MOST_ITEMS:
        items = [_rebuilt(item, made, given, depth + 1) for item in data["sequence"]]
        return tuple(items) if data.get("kind") == "tuple" else items
    raise _Malformed


def _arguments(call: Call, made: Sequence[torch.Tensor], given: Sequence[torch.Tensor]) -> tuple[list, dict] | None:
    """A recorded call's arguments rebuilt (``made``: what each earlier call made), or None where the
    call is not one the grader runs again or its arguments are not the data the recorder writes."""
    data = call.arguments
    if call.what not in _RERUN or not isinstance(data, dict) or set(data) - {"item"} != {"args", "kwargs"} \
            or not isinstance(data["args"], list) or not isinstance(data["kwargs"], dict) \
            or len(data["args"]) > MOST_ITEMS or len(data["kwargs"]) > MOST_ITEMS:
        return None
    if "out" in data["kwargs"]:
        return None  # a call that writes into a tensor it is given
    try:
        args = [_rebuilt(item, made, given) for item in data["args"]]
        kwargs = {str(key): _rebuilt(item, made, given) for key, item in data["kwargs"].items() if str(key).isidentifier()}
    except (_Malformed, ValueError, TypeError, RecursionError):
        return None
    if "inplace" in kwargs:
        kwargs["inplace"] = False  # never in place: the tensors are the record's own
    if "device" in kwargs:
        kwargs["device"] = "cpu"  # where the grader runs it (a record's tensors are on the CPU)
    return args, kwargs


def _item(call: Call) -> int | None:
    """Which of the tensors a call made it is, for a call that made several (chunk, max along a dim)."""
    item = call.arguments.get("item") if isinstance(call.arguments, dict) else None
    return item if type(item) is int and 0 <= item < MOST_ITEMS * MOST_ITEMS else None


def _run(name: str, args: Sequence[Any], kwargs: Mapping[str, Any], item: int | None = None) -> torch.Tensor | None:
    """One of the operations the grader runs again (``_RERUN``; ``item``: which of the tensors it makes,
    where it makes several), or None where it raises or makes anything but a tensor of at most
    MOST_MADE entries."""
    if _largest_made(name, args, kwargs) > MOST_MADE:
        return None  # an outer product of two long vectors, a broadcast of a column against a row
    operation = _RERUN[name]
    if args and not isinstance(args[0], torch.Tensor) and name not in _CREATE and callable(getattr(torch, name, None)):
        operation = getattr(torch, name)  # torch.pow(2.0, t): a number first, which no Tensor method takes
    try:
        with quiet(), torch.no_grad():
            made = _picked(operation(*args, **kwargs), item)
    except Exception:  # noqa: BLE001 - that change does not run
        return None
    return made if isinstance(made, torch.Tensor) and made.numel() <= MOST_MADE else None


def _largest_made(name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> int:
    """At least as many entries as one of the operations in ``_RERUN`` makes from these arguments,
    from their shapes alone (before it runs): a product's batch and outer sizes, the tensors joined
    by cat or stack, the broadcast of an elementwise operation's operands; an index that is a
    tensor (which may gather any number) counts as too many."""
    if name in _CREATE or name in _NEW:  # no more entries than the product of the numbers it is given
        numbers = [abs(n) for _, n in _integers([a for a in args if not isinstance(a, torch.Tensor)])]
        return math.prod(max(n, 1) for n in numbers)
    tensors = list(_tensors_in((args, kwargs)))
    if not tensors:
        return 0
    if name == "__getitem__" and len(tensors) > 1:
        return MOST_MADE + 1
    if name in ("matmul", "mm", "bmm") and len(tensors) == 2 and min(t.dim() for t in tensors) >= 2:
        a, b = tensors
        batch = _broadcast([a.shape[:-2], b.shape[:-2]])
        return 0 if batch is None else math.prod(batch) * a.shape[-2] * b.shape[-1]  # 0: it raises when it runs
    if name in ("outer", "cat", "stack"):
        return math.prod(t.numel() for t in tensors) if name == "outer" else sum(t.numel() for t in tensors)
    broadcast = _broadcast([t.shape for t in tensors])
    if broadcast is None:  # operands that do not broadcast (gather's index): what it makes is no larger than them
        return sum(t.numel() for t in tensors)
    return max(math.prod(broadcast), *(t.numel() for t in tensors))


def _broadcast(shapes: Sequence[Sequence[int]]) -> list[int] | None:
    """The shape that shapes broadcast to, or None where they do not (torch.broadcast_shapes imports
    the symbolic-shape machinery, a second's start for a grader's process)."""
    found: list[int] = []
    for sizes in itertools.zip_longest(*(reversed(tuple(shape)) for shape in shapes), fillvalue=1):
        wide = {n for n in sizes if n != 1}
        if len(wide) > 1:
            return None
        found.insert(0, wide.pop() if wide else 1)
    return found


def _picked(made: Any, item: int | None) -> Any:
    if item is None:
        return made
    return made[item] if isinstance(made, (tuple, list)) and item < len(made) else None


def _said(name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    """A call as code, its tensors left out: `.transpose(1, 2)`, `[..., 0:4]`, `torch.cat([…, …], dim=2)`."""
    def value(v: Any) -> str:
        if isinstance(v, torch.Tensor):
            return "…"
        if isinstance(v, slice):
            bounds = ["" if part is None else str(part) for part in (v.start, v.stop)]
            return ":".join(bounds + ([str(v.step)] if v.step is not None else []))
        if v is Ellipsis:
            return "..."
        if isinstance(v, tuple):
            return "(" + ", ".join(map(value, v)) + ("," if len(v) == 1 else "") + ")"
        if isinstance(v, list):
            return "[" + ", ".join(map(value, v)) + "]"
        return repr(v)
    if name in _OPERATORS and len(args) == 2 and not kwargs and isinstance(args[0], torch.Tensor):
        return f"… {_OPERATORS[name]} {value(args[1])}"
    if name == "__getitem__" and len(args) == 2:
        index = args[1]
        return "[" + (", ".join(map(value, index)) if isinstance(index, tuple) else value(index)) + "]"
    method = name not in _FUNCTIONS and args and isinstance(args[0], torch.Tensor)
    shown = [value(v) for v in (args[1:] if method else args)] + [f"{k}={value(v)}" for k, v in kwargs.items()]
    return f"{'.' if method else 'torch.'}{name}({', '.join(shown)})"


def _integers(value: Any, path: tuple = ()) -> Iterator[tuple[tuple, int]]:
    """The integers among a call's arguments (not booleans), each with where it lies."""
    if type(value) is int:
        yield path, value
    elif isinstance(value, slice):
        for k, part in enumerate((value.start, value.stop, value.step)):
            yield from _integers(part, path + (k,))
    elif isinstance(value, (tuple, list)):
        for k, item in enumerate(value):
            yield from _integers(item, path + (k,))


def _replaced(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    k, rest = path[0], path[1:]
    if isinstance(value, slice):
        parts = [value.start, value.stop, value.step]
        parts[k] = _replaced(parts[k], rest, new)
        return slice(*parts)
    items = list(value)
    items[k] = _replaced(items[k], rest, new)
    return tuple(items) if isinstance(value, tuple) else items


_ORDINAL = ("first", "second", "third", "fourth")
# A change to a call, as a function of the call's operation and arguments: the same change, applied to
# every call that the same line makes (a loop's passes), or None where a call's arguments do not have
# what it changes
Change = Callable[[str, list, dict], "tuple[str, list, dict] | None"]
_MISSING = object()


def _get(args: list, kwargs: dict, key: tuple) -> Any:
    where, k = key
    if where == "args":
        return args[k] if k < len(args) else _MISSING
    return kwargs.get(k, _MISSING)


def _put(args: list, kwargs: dict, key: tuple, value: Any) -> tuple[list, dict]:
    a, k = list(args), dict(kwargs)
    if key[0] == "args":
        a[key[1]] = value
    else:
        k[key[1]] = value
    return a, k


def _at(value: Any, path: tuple) -> Any:
    """The part of an argument that ``_integers`` found at ``path``, or _MISSING."""
    for k in path:
        if isinstance(value, slice):
            value = (value.start, value.stop, value.step)
        if not isinstance(value, (tuple, list)) or k >= len(value):
            return _MISSING
        value = value[k]
    return value


def _rank(args: Sequence[Any], kwargs: Mapping[str, Any]) -> int:
    return max((a.dim() for a in _tensors_in((args, kwargs))), default=0) + 1


def _integer_changed(key: tuple, path: tuple, delta: int | None, value: int | None) -> Change:
    """An integer among a call's arguments one more or one less (``delta``: a slice's bound in every
    pass of a loop, wherever the pass starts), or another axis (``value``)."""
    def change(name: str, args: list, kwargs: dict) -> tuple[str, list, dict] | None:
        whole = _get(args, kwargs, key)
        number = _at(whole, path)
        if type(number) is not int:
            return None
        new = number + delta if delta is not None else value
        a, k = _put(args, kwargs, key, _replaced(whole, path, new))
        if name == "transpose" and len(a) == 3 and _same_axis(a[1], a[2], _rank(a, k) - 1):
            return None  # a transpose of an axis with itself is no change of the code's to suggest
        return name, a, k
    return change


# Each kind of change yields (the change, its words or None): None where the changed call, as code,
# says it ("`.sum(dim=1)` in place of `.sum(dim=0)`"); words where the code alone would not show it.
Kind = Iterator[tuple[Change, "str | None"]]


def _number_changes(name: str, args: list, kwargs: dict, before: str) -> Kind:
    """An integer among the call's arguments (a dim, a size, a slice's bound) one more, one less or
    another axis; an axis left out of a reduction's tuple of axes (dim=-1 for dim=(0, -1)); a range
    one earlier or later (counted from 0, not from 1); a size given an axis of size 1 at its end
    ((B, 1) for (B,))."""
    rank = _rank(args, kwargs)
    keys = [("args", k) for k in range(len(args))] + [("kwargs", k) for k in kwargs]
    for key in keys:
        for path, number in _integers(_get(args, kwargs, key)):
            others = [number + 1, number - 1] + sorted(range(-rank, rank), key=lambda n: (abs(n - number), n))
            for other in dict.fromkeys(n for n in others if n != number and abs(n) <= MOST_INTEGER):
                delta = other - number if abs(other - number) == 1 else None
                yield _integer_changed(key, path, delta, None if delta is not None else other), None
    for key in keys:
        value = _get(args, kwargs, key)
        if not isinstance(value, (tuple, list)) or not all(type(n) is int for n in value):
            continue
        if name in _REDUCTIONS and 2 <= len(value) <= 4:
            for k in range(len(value)):
                yield _axis_left_out(key, k, len(value)), None
        if (name in _CREATE or name in _NEW) and 1 <= len(value) < 4:
            yield _column_size(key), None
    if name == "arange" and len(args) >= 2 and type(args[0]) is int and type(args[1]) is int:
        for step in (-1, 1):
            change = _range_shifted(step)
            shifted = change(name, args, kwargs)
            yield change, f"`{_said(*shifted)}` in place of {before}: as many numbers, counted from {shifted[1][0]}"


def _axis_left_out(key: tuple, k: int, count: int) -> Change:
    def change(name: str, args: list, kwargs: dict) -> tuple[str, list, dict] | None:
        dims = _get(args, kwargs, key)
        if not isinstance(dims, (tuple, list)) or len(dims) != count:
            return None
        rest = [d for j, d in enumerate(dims) if j != k]
        return name, *_put(args, kwargs, key, rest[0] if len(rest) == 1 else type(dims)(rest))
    return change


def _column_size(key: tuple) -> Change:
    def change(name: str, args: list, kwargs: dict) -> tuple[str, list, dict] | None:
        size = _get(args, kwargs, key)
        ok = isinstance(size, (tuple, list)) and all(type(n) is int for n in size)
        return (name, *_put(args, kwargs, key, type(size)([*size, 1]))) if ok else None
    return change


def _range_shifted(step: int) -> Change:
    def change(name: str, args: list, kwargs: dict) -> tuple[str, list, dict] | None:
        if len(args) < 2 or type(args[0]) is not int or type(args[1]) is not int:
            return None
        return name, [args[0] + step, args[1] + step, *args[2:]], kwargs
    return change


def _axis_changes(name: str, args: list, kwargs: dict) -> Kind:
    """An integer index taking its whole axis ([:] for [0]); two axes of a permute in each other's
    place; keepdim=True for a reduction."""
    if name == "__getitem__" and len(args) == 2:
        for k, part in enumerate(args[1] if isinstance(args[1], tuple) else (args[1],)):
            if type(part) is int:
                yield _whole_axis(k), None
    if name == "permute":
        for i, j in itertools.combinations(range(len(_order(args))), 2):
            yield _axes_swapped(i, j), None
    if name in _REDUCTIONS and kwargs.get("keepdim") is not True and len(args) <= 2:
        yield (lambda n, a, kw: (n, a, {**kw, "keepdim": True})), None


def _whole_axis(k: int) -> Change:
    def change(name: str, args: list, kwargs: dict) -> tuple[str, list, dict] | None:
        if len(args) != 2:
            return None
        index = args[1] if isinstance(args[1], tuple) else (args[1],)
        if k >= len(index) or type(index[k]) is not int:
            return None
        whole = index[:k] + (slice(None),) + index[k + 1:]
        return name, [args[0], whole if isinstance(args[1], tuple) else whole[0]], kwargs
    return change


def _order(args: list) -> Sequence[Any]:
    """A permute's order of axes, given as one sequence or as its arguments."""
    return args[1] if len(args) == 2 and isinstance(args[1], (tuple, list)) else tuple(args[1:])


def _axes_swapped(i: int, j: int) -> Change:
    def change(name: str, args: list, kwargs: dict) -> tuple[str, list, dict] | None:
        order = list(_order(args))
        if j >= len(order):
            return None
        order[i], order[j] = order[j], order[i]
        return name, ([args[0], *order] if len(args) > 2 else [args[0], type(_order(args))(order)]), kwargs
    return change


def _operation_changes(name: str) -> Kind:
    """An operation one word or sign away (``_SIBLINGS``; an activation in another's place takes none
    of its keywords)."""
    for sibling in _SIBLINGS.get(name, ()):
        yield (lambda n, a, kw, sibling=sibling: (sibling, *((a[:1], {}) if n in _ACTIVATIONS else (a, kw)))), None


def _operand_changes(name: str, args: list, kwargs: dict, before: str, reduced: frozenset[int]) -> Kind:
    """The call's two tensor operands, or the two tensors that cat or stack joins, in the other order;
    one operand given an axis of size 1 at its end (``reduced``: operands a reduction made, whose
    axis keepdim=True keeps) or transposed in its last two axes; a (values, indices) pair in place of
    one tensor, replaced by its first."""
    operands = [k for k, a in enumerate(args) if isinstance(a, torch.Tensor)]
    if len(operands) == 2 and name not in {"masked_fill", "where"}:
        yield _operands_swapped(*operands), f"{before} with its two operands in the other order"
    for k, joined in enumerate(args):
        if name in ("cat", "stack") and isinstance(joined, (tuple, list)) and len(joined) == 2:
            halves = " (its two halves)" if name == "cat" and joined[0].shape == joined[1].shape else ""
            yield _joined_swapped(k), f"{before} with the two tensors it joins{halves} in the other order"
    for place, k in enumerate(operands[:len(_ORDINAL)]):
        which = f"its {_ORDINAL[place]} operand" if len(operands) > 1 else "its input"
        if len(operands) > 1:
            kept = ", the axis that keepdim=True keeps" if k in reduced else ""
            yield (_operand_changed(k, lambda t: t.unsqueeze(-1)),
                   f"{before} with {which} given an axis of size 1 at its end (`[..., None]`{kept})")
        if args[k].dim() >= 2:
            yield (_operand_changed(k, lambda t: t.transpose(-2, -1) if t.dim() >= 2 else None),
                   f"{before} with {which}'s last two axes swapped (`.transpose(-2, -1)`)")
    for k, a in enumerate(args):
        if k > 0 and isinstance(a, (tuple, list)) and len(a) == 2 and all(isinstance(t, torch.Tensor) for t in a):
            yield _first_of_pair(k), (f"{before} with the first of the pair it is given (of a `max` or `min` along "
                                      "a dim, which gives (values, indices): `.values`)")


def _tensor_at(args: list, k: int) -> torch.Tensor | None:
    return args[k] if k < len(args) and isinstance(args[k], torch.Tensor) else None


def _operands_swapped(i: int, j: int) -> Change:
    def change(name: str, args: list, kwargs: dict) -> tuple[str, list, dict] | None:
        if _tensor_at(args, i) is None or _tensor_at(args, j) is None:
            return None
        swapped = list(args)
        swapped[i], swapped[j] = args[j], args[i]
        return name, swapped, kwargs
    return change


def _pair_at(args: list, k: int) -> Sequence[Any] | None:
    pair = args[k] if k < len(args) else None
    return pair if isinstance(pair, (tuple, list)) and len(pair) == 2 else None


def _joined_swapped(k: int) -> Change:
    def change(name: str, args: list, kwargs: dict) -> tuple[str, list, dict] | None:
        pair = _pair_at(args, k)
        return None if pair is None else (name, *_put(args, kwargs, ("args", k), type(pair)(reversed(pair))))
    return change


def _operand_changed(k: int, how: Callable[[torch.Tensor], "torch.Tensor | None"]) -> Change:
    def change(name: str, args: list, kwargs: dict) -> tuple[str, list, dict] | None:
        t = _tensor_at(args, k)
        new = None if t is None else how(t)
        return None if new is None else (name, *_put(args, kwargs, ("args", k), new))
    return change


def _first_of_pair(k: int) -> Change:
    def change(name: str, args: list, kwargs: dict) -> tuple[str, list, dict] | None:
        pair = _pair_at(args, k)
        ok = pair is not None and isinstance(pair[0], torch.Tensor)
        return (name, *_put(args, kwargs, ("args", k), pair[0])) if ok else None
    return change


def _variants(name: str, args: list, kwargs: dict, reduced: frozenset[int] = frozenset()) \
        -> Iterator[tuple[str, Change, tuple[str, list, dict]]]:
    """The call changed in one thing, each kind of change in turn (numbers, axes, the operation, the
    operands), with words for the change, the change itself (to apply to the other calls its line
    makes) and the changed call."""
    before = f"`{_said(name, args, kwargs)}`"
    kinds = itertools.chain(_number_changes(name, args, kwargs, before), _axis_changes(name, args, kwargs),
                            _operation_changes(name),
                            _operand_changes(name, args, kwargs, before, reduced))
    for change, words in kinds:
        new = change(name, args, kwargs)
        if new is not None:
            gloss = f" ({_GLOSS[name]})" if name in _GLOSS and new[0] != name else ""
            yield words or f"`{_said(*new)}` in place of {before}{gloss}", change, new


def _same_axis(a: Any, b: Any, rank: int) -> bool:
    return type(a) is int and type(b) is int and a % max(rank, 1) == b % max(rank, 1)


def _changes(call: Call, calls: Sequence[Call], made: Sequence[torch.Tensor], given: Sequence[torch.Tensor],
             dtype: torch.dtype, later_passes: bool = False) -> Iterator[tuple[str, torch.Tensor, Change]]:
    """Each change to a recorded call (``_variants``) that runs and makes something else than the call
    made (another shape counts: it changes what later calls make; ``later_passes``: or the same, where
    the change also applies to later calls of its line), with what it makes and the change itself.
    ``calls``: the calls its arguments refer to; ``made``: what each made."""
    rebuilt = _arguments(call, made, given)
    if rebuilt is None:
        return
    reduced = frozenset(k for k, item in enumerate(call.arguments["args"])
                        if isinstance(item, dict) and type(item.get("call")) is int
                        and 0 <= item["call"] < len(calls) and calls[item["call"]].what in _REDUCTIONS)
    given_first = rebuilt[0][0] if rebuilt[0] and isinstance(rebuilt[0][0], torch.Tensor) else None
    moves = given_first is not None and not _same_values(call.made, given_first, dtype)  # a layout call that moves values
    for words, change, (name, a, k) in _variants(call.what, *rebuilt, reduced):
        out = _run(name, a, k, _item(call))
        if out is None or not later_passes and out.shape == call.made.shape and torch.equal(out, call.made):
            continue
        if name in _LAYOUT and moves and _same_values(out, given_first, dtype):
            continue  # a layout call changed into one that moves nothing (a transpose of an axis of size 1): no change
        yield words, out, change


def mended(i: int, calls: Sequence[Call], given: Sequence[torch.Tensor], computed: Mapping[int, Sequence[torch.Tensor]],
           dtype: torch.dtype, end: int, closer: Callable[[torch.Tensor], bool]) -> str | None:
    """One change to the line of ``calls[i]`` (``_variants``) after which the call makes values the
    reference computes (``computed``), found by running it again, in words; None where no change
    does, or where the call cannot be run again (an operation the grader does not rerun, arguments
    that were not recorded as data). Values the reference computes elsewhere than at this step (its
    second half at the place of its first) would mislead: where the calls after it can be run again
    to ``calls[end]``, the output, the change must bring that ``closer`` to the reference's (not where
    they take tensors made out of the record's sight after it, ``_out_of_sight``: those would change too)."""
    made = [c.made for c in calls]
    places, _ = _passes(calls[:end + 1])
    again = [j for j in range(i + 1, end + 1) if places[j] == places[i]]
    unseen = any(i < k <= end for k in _out_of_sight(calls))
    for words, out, change in _changes(calls[i], calls, made, given, dtype):
        if varies(out) and _known(out, computed, dtype):  # one value everywhere matches by chance
            result = out if i == end else None if unseen else _replayed(calls, given, i, out, change, again, end)
            if result is None or closer(result):
                return words
    return None


def _unseen_in(data: Any) -> Iterator[int]:
    """The given tensors a call's recorded arguments refer to that code out of the record's sight made
    once the code had begun (``CallRecorder``: "unseen"), by their place among ``Ladder.given``."""
    if isinstance(data, dict):
        if type(data.get("given")) is int and data.get("unseen") is True:
            yield data["given"]
        for value in data.values():
            yield from _unseen_in(value)
    elif isinstance(data, list):
        for value in data:
            yield from _unseen_in(value)


def _out_of_sight(calls: Sequence[Call]) -> list[int]:
    """Where the record first meets each tensor that code out of its sight made (a given model's
    scores of the tokens so far): the first call that takes it. The calls after a change to calls[i],
    run again, cannot say what the output would be where one of these lies after i: that tensor
    may change with it."""
    first: dict[int, int] = {}
    for k, call in enumerate(calls):
        for g in _unseen_in(call.arguments):
            first.setdefault(g, k)
    return sorted(first.values())


MOST_RERUNS = 2000  # operations run again to find one change, earlier in the code, that mends a later result


def _passes(calls: Sequence[Call]) -> tuple[list[tuple], list[int]]:
    """Which calls one change to a line changes, and which calls one call made. A line's calls
    follow each other in the record, once per pass (a loop's, a helper's called twice): the k-th
    call of an operation in a pass is the k-th of the next; the tensors of one call (each chunk of a
    chunk) are one call. Returns each call's place (its function, line, operation and k; a call of
    no line of the student's has one of its own) and the index of the call that made it."""
    places, made_by, counts = [], [], {}
    for i, call in enumerate(calls):
        previous = calls[i - 1] if i else None
        if previous is None or (previous.within, previous.line) != (call.within, call.line):
            counts = {}
        a, b = previous and previous.arguments, call.arguments
        item = _item(call)
        same_call = previous is not None and item is not None and item > 0 and _item(previous) == item - 1 \
            and previous.what == call.what and previous.line == call.line \
            and isinstance(a, dict) and isinstance(b, dict) and {**a, "item": 0} == {**b, "item": 0}
        if not same_call:
            counts[call.what] = counts.get(call.what, 0) + 1
        made_by.append(made_by[-1] if same_call else i)
        places.append((call.within, call.line, call.what, counts[call.what]) if call.line > 0 else ("", 0, made_by[-1]))
    return places, made_by


def _replayed(calls: Sequence[Call], given: Sequence[torch.Tensor], start: int, out: torch.Tensor, change: Change,
              changed: Sequence[int], end: int) -> torch.Tensor | None:
    """What ``calls[end]`` makes once ``calls[start]`` makes ``out`` and each of ``changed`` (later calls
    of the same line) runs with the same change: every call after it that takes one of them,
    directly or through another, run again (``_run``); None where one of them cannot be."""
    made = [call.made for call in calls]
    made[start] = out
    touched = {start}
    for j in range(start + 1, end + 1):
        if j not in changed and touched.isdisjoint(calls[j].takes):
            continue
        rebuilt = _arguments(calls[j], made, given)
        call = rebuilt and (change(calls[j].what, *rebuilt) if j in changed else (calls[j].what, *rebuilt))
        made[j] = call and _run(*call, _item(calls[j]))
        if made[j] is None:
            return None
        touched.add(j)
    return made[end] if end in touched else None


def _swaps(calls: Sequence[Call], i: int, places: Sequence[tuple], made: Sequence[torch.Tensor],
           given: Sequence[torch.Tensor], end: int) -> Iterator[tuple[str, torch.Tensor, Change, list[int]]]:
    """Two calls of one line, operations one word apart (``_SIBLINGS``) made with the same arguments,
    each in the other's place (`c, s = x.cos(), x.sin()` where the code means the other way round):
    the words, what calls[i] then makes, the change and the later calls it changes (the other one,
    and both in every later pass)."""
    for j in range(i + 1, end + 1):
        pair = {calls[i].what: calls[j].what, calls[j].what: calls[i].what}
        if places[j][:2] != places[i][:2] or calls[j].arguments != calls[i].arguments \
                or calls[j].what not in _SIBLINGS.get(calls[i].what, ()) \
                or calls[i].what not in _SIBLINGS.get(calls[j].what, ()):
            continue
        rebuilt = _arguments(calls[i], made, given)
        out = rebuilt and _run(calls[j].what, *rebuilt, _item(calls[i]))
        if out is None:
            continue
        words = (f"`{_said(calls[i].what, *rebuilt)}` and `{_said(calls[j].what, *rebuilt)}` swapped, each in the "
                 "other's place")
        again = [k for k in range(i + 1, end + 1) if places[k] in (places[i], places[j])]
        yield words, out, (lambda n, a, kw: (pair[n], a, kw) if n in pair else None), again


def mended_earlier(calls: Sequence[Call], given: Sequence[torch.Tensor], end: int, right: Callable[[torch.Tensor], bool],
                   dtype: torch.dtype) -> tuple[int, str] | None:
    """The first of the calls that ``calls[end]`` is made from (itself included; those that make one
    value everywhere after the others) and one change to its line after which ``calls[end]``, the calls between them run again, makes a value that is
    ``right``: (its index, the change in words); None where none does within MOST_RERUNS. A change to
    a line changes every call that line makes after it (``_passes``): each pass of a loop, each chunk;
    two of its calls may change places (``_swaps``)."""
    needed = {end}
    for i in reversed(range(end + 1)):
        if i in needed:
            needed.update(calls[i].takes)
    places, made_by = _passes(calls[:end + 1])
    unseen = _out_of_sight(calls)
    made, budget, tried = [call.made for call in calls], MOST_RERUNS, set()
    # a call that makes one value everywhere (a tensor of zeros, a fill) last: changing its shape or value can
    # make up for a mistake elsewhere (a maximum over every row, one shift that softmax cancels)
    for i in sorted(needed, key=lambda i: (not varies(calls[i].made), i)):
        if places[i] in tried:
            continue
        tried.add(places[i])
        if any(i < k <= end for k in unseen):
            continue  # the calls after it cannot tell what a change to it makes of the output
        again = [j for j in range(i + 1, end + 1) if places[j] == places[i]]
        changes = itertools.chain(((words, out, change, again) for words, out, change
                                   in _changes(calls[i], calls, made, given, dtype, later_passes=bool(again))),
                                  _swaps(calls, i, places, made, given, end))
        for words, out, change, changed in changes:
            budget -= 1 + end - i
            if budget < 0:
                return None
            result = out if i == end else _replayed(calls, given, i, out, change, changed, end)
            if result is not None and varies(result) and right(result):
                passes = len({made_by[j] for j in (i, *changed) if places[j] == places[i]})
                return i, words + (", each time the line runs" if passes > 1 else "")
    return None


# --------------------------------------------------------------------------
# what each localising case gave, read by the observations below


@dataclass(frozen=True)
class Rung:
    """What one localising case gave: the code's outputs and the reference's (name -> value), the
    case's dtype (its tolerance), and whether every output was right (judging.rung)."""

    got: Mapping[str, Any]
    expected: Mapping[str, Any]
    dtype: torch.dtype
    right: bool


def _shape_of(value: Any) -> tuple[int, ...] | None:
    return tuple(value.shape) if isinstance(value, torch.Tensor) else None


def _rung_words(axes: Axes) -> list[str]:
    """What a finding calls each of ``axes.cases()``: the base, then each rung's words."""
    return ["the simplest case"] + [step.said for axis in axes.axes for step in axis.steps]


# --------------------------------------------------------------------------
# another shape on every rung: how it differs from the reference's, the same way on every one


def shape_finding(axes: Axes, rungs: Sequence[Rung]) -> str | None:
    """Where an output has another shape than the reference's on every localising case (``rungs``:
    what each gave), one relation between the two that holds on every case, in words, or None: an
    axis missing or extra, two axes merged or swapped, an axis with entries too few or too many, or
    of one size whatever the case. An axis is named by its place in the reference's shape and,
    where a rung changes its size, by that rung."""
    words = [""] + _rung_words(axes)[1:]
    for name in (rungs[0].expected if rungs else {}):
        pairs = [(_shape_of(rung.got.get(name)), _shape_of(rung.expected[name]), words[i])
                 for i, rung in enumerate(rungs) if _shape_of(rung.expected[name]) is not None]
        if not pairs or any(got is None or got == expected for got, expected, _ in pairs):
            continue
        said = _shape_relation(pairs)
        if said:
            got, expected, _ = pairs[0]
            return (f"on every one, the shape of your {name} differs from the reference's the same way: it {said} "
                    f"({_shape(got)} where the reference's is {_shape(expected)} in the simplest).")
    return None


def _shape(shape: tuple[int, ...]) -> str:
    return f"({', '.join(map(str, shape))}{',' * (len(shape) == 1)})"


def _axis(k: int, pairs: Sequence[tuple[Any, tuple[int, ...], str]]) -> str:
    """Axis k of the reference's shape, with a rung that changes its size where one does."""
    changes = next((rung for _, expected, rung in pairs if rung and expected[k] != pairs[0][1][k]), None)
    return f"axis {k}" + (f" (the one whose size changes with {changes})" if changes else "")


def _shape_relation(pairs: Sequence[tuple[tuple[int, ...], tuple[int, ...], str]]) -> str | None:
    def every(relation: Callable[[tuple[int, ...], tuple[int, ...]], bool]) -> bool:
        return all(relation(got, expected) for got, expected, _ in pairs)

    ndim = {len(got) - len(expected) for got, expected, _ in pairs}
    if ndim == {-1}:
        rank = len(pairs[0][1])
        missing = [k for k in range(rank) if every(lambda g, e: g == e[:k] + e[k + 1:])]
        if len(missing) == 1:
            return f"lacks the reference's {_axis(missing[0], pairs)}"
        if missing:  # axes of the same size on every case: which one is missing cannot be told
            return f"lacks one of the reference's axes {', '.join(map(str, missing[:-1]))} and {missing[-1]}"
        merged = [k for k in range(rank - 1) if every(lambda g, e: g == e[:k] + (e[k] * e[k + 1],) + e[k + 2:])]
        if len(merged) == 1:
            k = merged[0]
            return f"merges the reference's axes {k} and {k + 1} into one"
    elif ndim == {1}:
        rank = len(pairs[0][0])
        extra = [k for k in range(rank) if every(lambda g, e: g[:k] + g[k + 1:] == e)]
        if len(extra) == 1:
            return f"has an axis the reference's has not (its axis {extra[0]})"
    elif ndim == {0}:
        differ = sorted({k for got, expected, _ in pairs for k in range(len(got)) if got[k] != expected[k]})
        if len(differ) == 2:
            k, l = differ
            swapped = lambda e: e[:k] + (e[l],) + e[k + 1:l] + (e[k],) + e[l + 1:]  # noqa: E731
            if every(lambda g, e: g == swapped(e)):
                return f"has the reference's axes {k} and {l} in each other's place"
        if len(differ) == 1:
            (k,) = differ
            delta = {got[k] - expected[k] for got, expected, _ in pairs}
            if len(delta) == 1 and 0 not in delta:
                (d,) = delta
                return (f"has {abs(d)} {'entry' if abs(d) == 1 else 'entries'} too {'many' if d > 0 else 'few'} "
                        f"along the reference's {_axis(k, pairs)}")
            if len({got[k] for got, _, _ in pairs}) == 1 < len({expected[k] for _, expected, _ in pairs}):
                return f"has size {pairs[0][0][k]} along the reference's {_axis(k, pairs)} whatever the case"
    return None


# --------------------------------------------------------------------------
# where in the output: the entries that differ in the first case that is wrong


def where_it_differs(axes: Axes, rungs: Sequence["Rung | None"], verdicts: Sequence[bool | None]) -> str | None:
    """In the first localising case the code gets wrong, the entries of an output that differ from
    the reference's, when they are not all of them, in words: above, below or on the diagonal of
    the last two axes, or some indices of one axis; None where every entry differs, where the shapes
    differ, or where no case can be read entry by entry."""
    words = _rung_words(axes)
    first = next((i for i, right in enumerate(verdicts) if right is False), None)
    rung = rungs[first] if first is not None and first < len(rungs) else None
    if rung is None:
        return None
    for name, expected in rung.expected.items():
        got = rung.got.get(name)
        if not (isinstance(got, torch.Tensor) and isinstance(expected, torch.Tensor)) or got.shape != expected.shape \
                or got.dim() == 0 or got.is_complex():
            continue
        differ = ~torch.isclose(got.detach().to("cpu", torch.float64), expected.to(torch.float64), equal_nan=True,
                                **tolerance(rung.dtype))
        if differ.any() and not differ.all():
            where = _entries(differ)
            if where:
                return (f"in the first case it gets wrong ({words[first]}), the entries of your {name} that differ "
                        f"from the reference's are {where}.")
    return None


def _entries(differ: torch.Tensor) -> str | None:
    if differ.dim() >= 2 and min(differ.shape[-2:]) > 1:
        plane = differ.reshape(-1, *differ.shape[-2:]).any(0)  # (L, S): where any leading slice differs
        i, j = torch.arange(plane.shape[0])[:, None], torch.arange(plane.shape[1])[None, :]
        for region, said in ((j > i, "above the diagonal of its last two axes (entries [..., i, j] with j > i)"),
                             (j < i, "below the diagonal of its last two axes (entries [..., i, j] with j < i)"),
                             (j == i, "on the diagonal of its last two axes (entries [..., i, i])")):
            if torch.equal(plane, region):  # every entry of the region, and no other
                return f"exactly those {said}"
    for k, size in enumerate(differ.shape):
        hit = differ.movedim(k, 0).reshape(size, -1).any(1)
        if size > 1 and not hit.all():
            at = hit.nonzero().flatten().tolist()
            named = (f"index {at[0]} (the first)" if at == [0] else f"index {at[0]} (the last)" if at == [size - 1]
                     else f"{'indices' if len(at) > 1 else 'index'} {', '.join(map(str, at))}")
            return f"all at {named} of its axis {k} (of {size})"
    return None


# --------------------------------------------------------------------------
# a factor: the reference's output times one number on each wrong case


def factor_finding(axes: Axes, rungs: Sequence["Rung | None"], verdicts: Sequence[bool | None]) -> str | None:
    """Where on every localising case the code gets wrong an output is the reference's times one
    number (least squares, within the case's tolerance; another number on another case allowed),
    those numbers in words, with the rungs where they change; else None."""
    words = _rung_words(axes)
    wrong = [i for i, right in enumerate(verdicts) if right is False]
    if not wrong or any(i >= len(rungs) or rungs[i] is None for i in wrong):
        return None
    for name in rungs[wrong[0]].expected:
        factors = [_factor(rungs[i].got.get(name), rungs[i].expected[name], rungs[i].dtype) for i in wrong]
        if any(c is None for c in factors):
            continue
        said = [f"{_number(factors[0])} {'in' if wrong[0] == 0 else 'with'} {words[wrong[0]]}"]
        said += [f"{_number(c)} with {words[i]}" for i, c in zip(wrong[1:], factors[1:])
                 if not math.isclose(c, factors[0], rel_tol=1e-6)][:2]
        return (f"on every case it gets wrong, your {name} is the reference's times a factor: "
                f"{'; '.join(said)}.")
    return None


def _factor(got: Any, expected: Any, dtype: torch.dtype) -> float | None:
    if not (isinstance(got, torch.Tensor) and isinstance(expected, torch.Tensor)) or got.shape != expected.shape \
            or not got.is_floating_point() or got.numel() < 2:  # one number is always another one's multiple
        return None
    got, expected = got.detach().to("cpu", torch.float64), expected.to(torch.float64)
    scale = float((expected * expected).sum())
    if scale == 0 or not torch.isfinite(got).all():
        return None
    c = float((got * expected).sum()) / scale
    fits = torch.allclose(got, c * expected, **tolerance(dtype)) and not torch.allclose(got, expected, **tolerance(dtype))
    return c if fits and c != 0 else None


def _number(c: float) -> str:
    """A factor, with the simple form it has where it has one: 0.707 (1/√2), 0.25 (1/4), 3 ..."""
    sign = "-" if c < 0 else ""
    for n in range(2, 65):
        for value, form in ((float(n), None), (1 / n, f"1/{n}"), (1 / math.sqrt(n), f"1/√{n}"), (math.sqrt(n), f"√{n}")):
            if math.isclose(abs(c), value, rel_tol=1e-6):
                return f"{sign}{n}" if form is None else f"{c:.3g} ({sign}{form})"
    return f"{c:.3g}" if f"{c:.3g}" != "1" else f"{c:.6g}"


# --------------------------------------------------------------------------
# a number: how it changes from one rung to the next, against how the reference's does


def _real(value: Any) -> float | None:
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_complex():
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def numbers_finding(axes: Axes, rungs: Sequence["Rung | None"]) -> str | None:
    """Where an output is one number: the reference's value but of another kind on every localising
    case (a Python float for a 0-dim tensor); the same number on every case while the reference's
    changes (said with it), or, along each axis, how the number changes from the rung below to the
    rung (the ratio of the two) against how the reference's does: the axes where the two ratios
    differ, said with both, and those where they agree. None where no axis tells them apart, or a
    case raised or gave no number."""
    if not rungs or any(rung is None for rung in rungs) or len(rungs) != len(axes.cases()):
        return None
    words = _rung_words(axes)
    for name in rungs[0].expected:
        got, expected = [_real(rung.got.get(name)) for rung in rungs], [_real(rung.expected[name]) for rung in rungs]
        if any(value is None for value in got + expected) or all(rung.right for rung in rungs):
            continue
        kinds = {_kind(rung.got.get(name)) for rung in rungs}
        if all(math.isclose(g, e, rel_tol=1e-9, abs_tol=1e-12) for g, e in zip(got, expected)) and len(kinds) == 1 \
                and kinds != {_kind(rungs[0].expected[name])}:
            return (f"your {name} has the reference's value in every one of them, but is {kinds.pop()} where the "
                    f"reference's is {_kind(rungs[0].expected[name])}.")
        if len(set(got)) == 1 and len(set(expected)) > 1:
            return (f"your {name} is {_plain(got[0])} in every one of them, whatever the case; the reference's "
                    f"changes ({_plain(expected[0])} in the simplest, {_plain(expected[-1])} with {words[-1]}).")
        differ, agree = [], []
        for axis in axes.axes:
            below = 0
            for index, step in axes.numbered(axis):
                pair = (got[below], got[index], expected[below], expected[index])
                if 0 not in pair:
                    theirs, yours = pair[3] / pair[2], pair[1] / pair[0]
                    lower = words[below] if below else axis.said
                    if math.isclose(theirs, yours, rel_tol=1e-6):
                        agree.append(f"{step.said} (×{_plain(theirs)})")
                    else:
                        differ.append(f"from {lower} to {step.said}, the reference's {name} changes ×{_plain(theirs)} "
                                      f"and yours ×{_plain(yours)} (look at {axis.where})")
                    break
                below = index
        if differ and agree:
            return (f"{'; '.join(differ[:MOST_FINDINGS])}; yours changes as the reference's does with "
                    f"{', '.join(agree[:3])}.")
        factors = {round(g / e, 9) for g, e in zip(got, expected) if e != 0}
        if not differ and len(factors) == 1 and 0 not in expected and factors != {1.0}:
            return f"your {name} is the reference's times {_number(factors.pop())} in every one of them."
    return None


def _kind(value: Any) -> str:
    """What a number is, in words: "a Python float", "a 0-dim tensor"."""
    if isinstance(value, torch.Tensor):
        return "a 0-dim tensor" if value.dim() == 0 else f"a tensor of shape {_shape(tuple(value.shape))}"
    return f"a Python {type(value).__name__}" if type(value).__module__ == "builtins" else "another type"


def _plain(x: float) -> str:
    return f"{x:.4g}"


def finding(axes: Axes, ladder: Ladder, rungs: Sequence["Rung | None"], at: At | None = None) -> str | None:
    """What the ladder shows, in words (``rungs``: what each case that ran gave, None where it
    raised; ``at``: a case as the judge sees it, with the reference on it): where the base case is
    wrong and the module's steps were observed, the first step that differs (from the reference's
    own steps where the reference calls them; else the projections' chain, ``inside_module``); for
    other code, the first line that leaves the reference's values (``traced``); then the first
    rungs along the axes where the verdict changes, and where in the output the first wrong case
    differs; where every case is wrong in shape, how an output's shape differs from the
    reference's on every one; where an output is a number, how it changes along the axes
    (``numbers_finding``)."""
    verdicts = [rung is not None and rung.right for rung in rungs]
    if verdicts and not any(verdicts) and len(rungs) == len(axes.cases()) and all(rungs):
        shaped = shape_finding(axes, rungs)
        if shaped:  # the first line that leaves the reference's values, where one can be said, then the shape
            inside = traced(axes, ladder, verdicts, at) if at is not None and not axes.steps else None
            return (f"{inside} " if inside else "") + LEAD + shaped
    numbers = numbers_finding(axes, rungs) if verdicts and verdicts[0] is False else None
    if numbers:  # a number wrong from the simplest case on: how it changes, where no verdict changes
        return LEAD + numbers
    where = factor_finding(axes, rungs, verdicts) or where_it_differs(axes, rungs, verdicts)
    found = _finding_from_verdicts(axes, ladder, verdicts, at)
    if found and where:
        return f"{found} {where[0].upper()}{where[1:]}"
    return found or (where and LEAD + where)


def _finding_from_verdicts(axes: Axes, ladder: Ladder, verdicts: Sequence[bool | None], at: At | None) -> str | None:
    inside = None
    if at is not None and verdicts and verdicts[0] is False and ladder.outcomes:
        base, run_reference = at(0)
        if axes.steps:
            expected = reference_steps(axes, run_reference)
            inside = steps_compared(axes, ladder, expected, base) if expected else inside_module(axes, ladder, base)
            inside = inside and STEP_BY_STEP + inside
        else:
            related = output_relation(ladder, base, "your code")
            inside = related and RELATED + related
    if at is not None and (not inside or axes.steps):  # a module's steps, then the line inside where one is said
        lines = traced(axes, ladder, verdicts, at)
        if lines and inside:
            lines = lines.replace(STEP_BY_STEP, "Line by line: ", 1)
        inside = f"{inside} {lines}" if inside and lines else inside or lines
    along = along_axes(axes, verdicts)
    if inside:  # the step, then what the ladder adds (which heads, which positions)
        return inside + (f" {along}" if along else "")
    return along


def traced(axes: Axes, ladder: Ladder, verdicts: Sequence[bool | None], at: At) -> str | None:
    """The first line that leaves the reference's values (``first_call_that_differs``), in the first
    case the code gets wrong and returns from where one can be said (the smallest, or the first
    rung where the mistake shows; a later one where the reference shows no step in the first: one
    feature, where scaling by 1/sqrt(1) changes nothing)."""
    wrong = [i for i, right in enumerate(verdicts) if right is False and i < len(ladder.calls)
             and (ladder.outcomes[i].error is None or i < len(ladder.failed) and ladder.failed[i] is not None)]
    words = _rung_words(axes)
    for index in wrong:
        case, run_reference = at(index)
        calls, given = ladder.calls[index], ladder.given[index] if index < len(ladder.given) else []
        failed = ladder.failed[index] if ladder.outcomes[index].error is not None else None
        found = raised_line_mended(failed, calls, given, case, run_reference) if failed is not None else \
            first_call_that_differs(calls, ladder.outcomes[index], case, run_reference, given)
        if found:
            lead = (STEP_BY_STEP if index == 0 else
                    f"{'The first case' if index == wrong[0] else 'A case'} it gets wrong ({words[index]}), step by "
                    "step against the reference: ")
            return lead + found
    return None