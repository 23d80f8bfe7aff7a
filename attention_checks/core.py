"""Machinery shared by every assignment's checks.

An assignment module (e.g. ``qkv.py``) turns small case dicts into ``Case``
objects: inputs generated on the CPU from a seed, a float64 CPU reference, and
the outputs that known mistakes would give. ``run_check`` calls the student's
function on each case (the *probe*), compares what it returned with the reference
(the *judgement*) and turns the results into what nbgrader reads:

* every case passes      -> prints one line, returns None     (full points)
* some credit            -> prints a report, returns a number (partial credit)
* no credit              -> raises CheckFailed with the report (0 points)

so a check call must be the last expression of its test cell.

Under the autograder the probe's outcomes are also recorded, and the grader judges
them again in its own process (see ``record``): only that judgement counts.
"""

from __future__ import annotations

import contextlib
import io
import functools
import json
import logging
import math
import numbers
import os
import sys
import traceback
import warnings
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import torch
from torch.overrides import TorchFunctionMode

from .record import Outcome, current_replay, decode_outcome, device_name, publish, recording

# --------------------------------------------------------------------------
# devices, dtypes, tolerances

DTYPES = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
}

# Tolerances by the dtype of the *inputs*; a value passes when
# |got - expected| <= atol + rtol * |expected| (torch.allclose).
# float32 must hold on a GPU that runs matmuls in TF32 (inputs rounded to a
# 10-bit mantissa) or fused kernels: emulating TF32 on the 03-qkv cases gives
# errors up to 2e-3 for scores of order 1 (tests/test_attention_checks.py runs
# that emulation). float64 is tight, so that computing in float32 inside fails.
TOLERANCES = {
    torch.float16: dict(rtol=1e-2, atol=1e-2),
    torch.bfloat16: dict(rtol=3e-2, atol=3e-2),
    torch.float32: dict(rtol=5e-3, atol=5e-3),
    torch.float64: dict(rtol=1e-9, atol=1e-11),
}

# Stands for the device in a case's description, which the report fills in: where the
# student's code ran, which under the autograder is not where the grader judges it.
DEVICE = "<device>"

# Share of a case's credit for an output of the right shape, dtype and device;
# the rest is for the right values.
STRUCTURE_SHARE = 0.25


def pick_device() -> torch.device:
    """Where the student's code runs: the GPU when there is one. The grader, which only
    judges recorded outcomes, always works on the CPU (same numbers on every machine)."""
    if current_replay() is not None:
        return torch.device("cpu")
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def as_dtype(dtype: str | torch.dtype) -> torch.dtype:
    return DTYPES[dtype] if isinstance(dtype, str) else dtype


def tolerance(dtype: torch.dtype) -> dict:
    return TOLERANCES.get(dtype, TOLERANCES[torch.float32])


def with_defaults(spec: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """A case dict completed with its check's defaults; unknown keys are an error."""
    unknown = set(spec) - set(defaults) - {"seed"}
    if unknown:  # an instructor's typo, not a student's mistake
        raise ValueError(f"unknown case keys {sorted(unknown)}; allowed: {sorted(defaults)} and seed")
    return {**defaults, **spec}


def case_seed(spec: Mapping[str, Any], salt: str = "") -> int:
    """The case's own seed, or one derived from its content (stable across runs and machines)."""
    if spec.get("seed") is not None:
        return int(spec["seed"])
    text = salt + repr(sorted((str(k), repr(v)) for k, v in spec.items()))
    return zlib.crc32(text.encode())


def generator(seed: int) -> torch.Generator:
    # a private CPU generator: same inputs on every device, global RNG untouched
    return torch.Generator(device="cpu").manual_seed(seed)


def randn(*shape: int, gen: torch.Generator, dtype: torch.dtype, std: float = 1.0) -> torch.Tensor:
    # drawn in float64 so that a case gives the same numbers in every dtype
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * std).to(dtype)


def reference(t: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """A CPU copy, float64 unless told (never a view: student code may modify its inputs in place)."""
    return t.detach().to("cpu", dtype, copy=True)


# --------------------------------------------------------------------------
# cases and mistakes


@dataclass
class Mistake:
    """What a specific buggy implementation would return, and a hint about it."""

    hint: str
    outputs: dict[str, torch.Tensor | None]  # output name -> CPU float64; None or absent: not determined by the bug


@dataclass
class Case:
    """One call of the student's function and what it must return."""

    inputs: str  # shown in reports
    run: Callable[[Callable], Any]  # calls the student's function on this case's inputs
    expected: dict[str, Any]  # output name -> CPU float64 tensor, or a plain value (number, str, tuple)
    like: torch.Tensor  # outputs must have its dtype and device
    mistakes: Callable[[], dict[str, Mistake]] = dict  # built only when a case fails


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def describe(named: Mapping[str, Any], like: torch.Tensor | None = None, with_dtype: Sequence[str] = ()) -> str:
    """'query (2, 5, 8), attn_mask bool (5, 5), is_causal=True; float32 on cpu'.
    A tensor's dtype is shown when it differs from like's, or when its name is in with_dtype."""
    parts = []
    for name, value in named.items():
        if isinstance(value, torch.Tensor):
            same = like is not None and value.dtype == like.dtype and name not in with_dtype
            kind = "" if same else f" {_dtype_name(value.dtype)}"
            parts.append(f"{name}{kind} {tuple(value.shape)}")
        else:
            parts.append(f"{name}={value!r}")
    where = f"; {_dtype_name(like.dtype)} on {DEVICE}" if like is not None else ""  # filled in by the report
    return ", ".join(parts) + where


# --------------------------------------------------------------------------
# comparing one output


@dataclass
class Verdict:
    structure_ok: bool  # a tensor of the right shape, dtype and device
    values_ok: bool
    line: str  # e.g. "shape (2, 5, 4) ok; values differ: max abs error 0.31 (allowed 0.005 + 0.005·|expected|)"

    @property
    def fraction(self) -> float:
        return STRUCTURE_SHARE * self.structure_ok + (1 - STRUCTURE_SHARE) * self.values_ok


def _as_reference(got: Any) -> torch.Tensor | None:
    try:
        return reference(got)
    except Exception:  # e.g. a meta tensor, a complex one
        return None


def same_plain(got: Any, expected: Any) -> bool:
    """Equality for plain values: floats to 1e-6 relative, the rest exactly (bool is not int)."""
    if isinstance(expected, (tuple, list)):
        return (isinstance(got, (tuple, list)) and len(got) == len(expected)
                and all(same_plain(g, e) for g, e in zip(got, expected)))
    if isinstance(expected, bool) or isinstance(got, bool):
        return type(got) is type(expected) and got == expected
    if isinstance(expected, float) and isinstance(got, numbers.Real):  # numpy scalars too
        return math.isclose(float(got), expected, rel_tol=1e-6, abs_tol=1e-12)
    if isinstance(expected, int) and isinstance(got, numbers.Integral):
        return int(got) == expected
    return type(got) is type(expected) and got == expected


def close(got: Any, expected: Any, dtype: torch.dtype, equal_nan: bool = False) -> bool:
    """Same shape and values within the tolerances of `dtype` (the inputs' dtype)."""
    if not isinstance(expected, torch.Tensor):
        return same_plain(got, expected)
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(expected.shape):
        return False
    got = _as_reference(got)
    return got is not None and torch.allclose(got, expected, equal_nan=equal_nan, **tolerance(dtype))


def compare(got: Any, expected: Any, like: torch.Tensor) -> Verdict:
    if not isinstance(expected, torch.Tensor):
        ok = same_plain(got, expected)
        return Verdict(ok, ok, "ok" if ok else f"got {_short(got)}, expected {_short(expected)}")
    if not isinstance(got, torch.Tensor):
        return Verdict(False, False, f"expected a tensor, got {type(got).__name__}")
    shape, want = tuple(got.shape), tuple(expected.shape)
    if shape != want:
        return Verdict(False, False, f"shape {shape}, expected {want}")
    problems = []
    if got.dtype != like.dtype:
        problems.append(f"dtype {_dtype_name(got.dtype)}, expected {_dtype_name(like.dtype)} (the input's)")
    if device_name(got) != device_name(like):
        problems.append(f"on {device_name(got)}, expected {device_name(like)} (the input's device)")
    structure_ok = not problems

    tol = tolerance(like.dtype)
    values = _as_reference(got)
    if values is None:
        return Verdict(structure_ok, False, "; ".join([f"shape {shape} ok", *problems, "values cannot be read"]))
    values_ok = torch.allclose(values, expected, **tol)
    if not values_ok:
        finite = expected.isfinite() & values.isfinite()
        nonfinite = int((values.isnan() | (values.isinf() != expected.isinf())).sum())
        err = (values - expected)[finite].abs().max().item() if finite.any() else math.nan
        text = f"values differ: max abs error {err:.3g} (allowed {tol['atol']:g} + {tol['rtol']:g}·|expected|)"
        if nonfinite:
            text += f", {nonfinite} NaN/inf where the reference has none"
        if like.dtype == torch.float64 and torch.allclose(values, expected, **TOLERANCES[torch.float32]):
            text += "; they agree to float32 precision only: compute float64 inputs in float64"
        problems.append(text)
    line = "; ".join([f"shape {shape} ok", *problems] + (["values ok"] if values_ok else []))
    return Verdict(structure_ok, values_ok, line)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def diagnose(got: Mapping[str, Any], case: Case, wrong: set[str]) -> list[str]:
    """Hints of the known mistakes that explain the outputs in `wrong`, first match first."""
    dtype, hints = case.like.dtype, []
    for mistake in case.mistakes().values():
        claimed = {name: out for name, out in mistake.outputs.items() if out is not None}
        if not claimed.keys() & wrong:
            continue
        # the bug must reproduce every output it determines, and differ from the reference somewhere
        if all(close(got.get(name), out, dtype, equal_nan=True) for name, out in claimed.items()) and any(
            not close(out, case.expected[name], dtype, equal_nan=True) for name, out in claimed.items()
        ):
            hints.append(mistake.hint)
            wrong = wrong - claimed.keys()
            if not wrong:
                break
    return hints


# --------------------------------------------------------------------------
# running student code


class CheckFailed(AssertionError):
    """A check that earns no points; its message is the report."""

    def _render_traceback_(self) -> list[str]:
        # IPython shows this instead of a traceback: the report alone, without
        # the helper's frames or the test cell's source (hidden tests stay hidden).
        return f"\x1b[0;31m{type(self).__name__}\x1b[0m: {self}".splitlines()


class PartialCredit(float):
    """A test cell's partial score. Its repr is the bare number: nbgrader reads the
    text/plain of a test cell's result as the points it earns."""

    def __new__(cls, score: float, points: float):
        obj = super().__new__(cls, score)
        obj.points = points
        return obj

    def __repr__(self) -> str:
        return repr(float(self))

    def _repr_html_(self) -> str:
        return f"<b>Partial credit: {float(self):g} / {self.points:g} points</b> (see the report above)"


class ForbiddenCalls(TorchFunctionMode):
    """Records calls of forbidden torch functions, however the student bound them
    (an alias, torch._C._nn.*, torch.ops.aten.*). Calls still run: raising would
    let a try/except in student code hide them."""

    def __init__(self, forbidden: Mapping[Any, str]):
        # key: a function, or an operator's qualified name like "aten::softmax"; value: the name shown
        super().__init__()
        self.by_id = {id(f): name for f, name in forbidden.items() if not isinstance(f, str)}
        self.by_op = {f: name for f, name in forbidden.items() if isinstance(f, str)}
        self.seen: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        packet = getattr(func, "_overloadpacket", func)  # torch.ops.aten.x.default -> torch.ops.aten.x
        name = self.by_id.get(id(func)) or self.by_op.get(getattr(packet, "_qualified_op_name", None))
        if name and name not in self.seen:
            self.seen.append(name)
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def _quiet_fds():
    # C-level writes to fd 1/2 reach the notebook as a stream through ipykernel's capture
    saved = []
    try:
        for stream in (sys.__stdout__, sys.__stderr__):
            if stream is not None:
                stream.flush()
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            saved.append((fd, os.dup(fd)))
            os.dup2(devnull, fd)
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass  # no real fds (unusual embedders): Python-level capture still applies
    try:
        yield
    finally:
        for fd, copy in saved:
            os.dup2(copy, fd)
            os.close(copy)


@contextlib.contextmanager
def quiet():
    """Swallow whatever runs inside prints, warns or logs: nbgrader gives 0 points to a
    test cell that writes to stderr, and a correct solution that prints must pass."""
    previous_disable = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with warnings.catch_warnings(), _quiet_fds():
            warnings.simplefilter("ignore")
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                yield
    finally:
        logging.disable(previous_disable)


def _where(error: BaseException) -> str:
    """The last line of the student's own code in the traceback ('' if none)."""
    here = os.path.dirname(__file__)
    torch_dir = os.path.dirname(torch.__file__)
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        if not frame.filename.startswith((here, torch_dir)) and frame.line:
            return frame.line.strip()
    return ""


def describe_error(error: BaseException) -> str:
    if isinstance(error, NotImplementedError):
        return "not implemented yet (raises NotImplementedError)"
    text = f"raised {type(error).__name__}: {error}".strip().rstrip(":")
    line = _where(error)
    return text + (f"\n      at: {line}" if line else "")


def _unpack(result: Any, names: Sequence[str]) -> tuple[dict[str, Any], str | None]:
    if len(names) == 1:
        return {names[0]: result}, None
    if not isinstance(result, (tuple, list)) or len(result) != len(names):
        what = f"a {type(result).__name__}" + (f" of length {len(result)}" if isinstance(result, (tuple, list)) else "")
        return {}, f"expected a tuple ({', '.join(names)}), got {what}"
    return dict(zip(names, result)), None


# --------------------------------------------------------------------------
# the check


def built_once_in_grader(build: Callable[..., Case]) -> Callable[..., Case]:
    """A case builder whose cases the grader builds once per process.

    A case depends only on its spec (and device), so the grader, which judges every
    student's records against the same test cells, would build the same inputs and
    references again for each of them. Only in the grader: there the student's code is
    never called, so no case can be changed by it; a kernel builds its own.
    """
    built: dict[tuple, Case] = {}

    @functools.wraps(build)
    def cached(spec: Mapping[str, Any], *device: torch.device) -> Case:
        if current_replay() is None:
            return build(spec, *device)
        key = (json.dumps(spec, sort_keys=True, default=repr), *map(str, device))
        if key not in built:
            built[key] = build(spec, *device)
        return built[key]
    return cached


@dataclass
class CaseResult:
    fraction: float
    lines: list[str] = field(default_factory=list)  # what went wrong; empty when the case passes
    hints: list[str] = field(default_factory=list)
    not_implemented: bool = False


def probe(fn: Callable, case: Case, forbidden: ForbiddenCalls) -> Outcome:
    """Run the student's code on one case: the only place it runs."""
    try:
        with quiet(), forbidden:
            return Outcome(case.run(fn))
    except Exception as error:  # student code: any failure is this case's
        return Outcome(error=describe_error(error), not_implemented=isinstance(error, NotImplementedError))


def judge(outcome: Outcome, case: Case) -> CaseResult:
    """Compare one outcome with the case's reference; pure, so the grader can redo it."""
    if outcome.error is not None:
        return CaseResult(0.0, [outcome.error], not_implemented=outcome.not_implemented)
    names = list(case.expected)
    got, problem = _unpack(outcome.value, names)
    if problem:
        return CaseResult(0.0, [problem])
    verdicts = {name: compare(got[name], case.expected[name], case.like) for name in names}
    fraction = sum(v.fraction for v in verdicts.values()) / len(verdicts)
    if fraction == 1:
        return CaseResult(1.0)
    width = max(map(len, names))
    lines = [f"{name:<{width}} : {v.line}" for name, v in verdicts.items()]
    wrong = {name for name, v in verdicts.items() if not v.values_ok}
    hints = []
    if wrong:
        with quiet():
            hints = diagnose(got, case, wrong)
    return CaseResult(fraction, lines, hints)


def run_check(
    name: str,
    fn: Callable,
    cases: Sequence[Case],
    *,
    points: float,
    forbidden: Mapping[Any, str] | None = None,
    shown: int = 3,
) -> PartialCredit | None:
    """Score `fn` on `cases` (see the module docstring for what nbgrader gets)."""
    __tracebackhide__ = True
    forbidden = dict(forbidden or {})
    replay = current_replay()
    if replay is None:
        if not callable(fn):
            raise CheckFailed(f"{name}: expected a function, got {type(fn).__name__}") from None
        guard = ForbiddenCalls(forbidden)
        outcomes = [probe(fn, case, guard) for case in cases]
        seen = guard.seen
        if recording():  # under the autograder: only the grader's judgement counts (record.py)
            publish(name, outcomes, [case.like for case in cases], seen)
            return None
    else:
        outcomes, seen = _replayed(replay, name, fn, cases, forbidden, points)

    results = [judge(outcome, case) for outcome, case in zip(outcomes, cases)]
    if seen:
        raise CheckFailed(
            f"{name} calls {' and '.join(seen)}, which this exercise asks you to write yourself. "
            f"Doing so earns no points for that function (0 / {points:g})."
        ) from None

    fraction = sum(r.fraction for r in results) / len(results)
    if fraction == 1:
        print(f"✓ {name}: all {len(results)} cases pass ({points:g} / {points:g} points)")
        return None

    # round to 2 decimals for a deterministic grade; never show full points for a failing check
    score = min(round(points * fraction, 2), round(points - 0.01, 2))
    failed = [(i, r) for i, r in enumerate(results, 1) if r.fraction < 1]
    if all(r.not_implemented for r in results):
        report = [f"✗ {name} is not implemented yet (0 / {points:g} points)"]
    else:
        report = [f"✗ {name}: {len(failed)} of {len(results)} cases fail ({max(score, 0):g} / {points:g} points)"]
        given: list[str] = []  # each hint once, where it first applies

        def new_hints(r: CaseResult) -> list[str]:
            fresh = [h for h in r.hints if h not in given]
            given.extend(fresh)
            return fresh

        for i, r in failed[:shown]:
            like = cases[i - 1].like
            report.append(f"\ncase {i}: {cases[i - 1].inputs.replace(DEVICE, device_name(like).split(':')[0])}")
            report += ["    " + line for line in r.lines]
            fresh = new_hints(r)
            report += [f"    hint: {h}" for h in fresh]
            if r.hints and not fresh:
                report.append("    hint: as above")
        if len(failed) > shown:
            report.append(f"\n... and {len(failed) - shown} more failing case(s)")
            for _, r in failed[shown:]:
                report += [f"hint: {h}" for h in new_hints(r)]
    text = "\n".join(report)
    if score <= 0:
        raise CheckFailed(text) from None
    print(text)
    return PartialCredit(score, points)


def _replayed(replay, name: str, fn: Any, cases: Sequence[Case], forbidden: Mapping[Any, str], points: float):
    """The grader's side: the kernel's recorded outcomes, and every forbidden use found."""
    __tracebackhide__ = True
    record = replay.take(name)
    if record is None or not isinstance(record.get("outcomes"), list) or len(record["outcomes"]) != len(cases):
        raise CheckFailed(f"{name}: no result was recorded for this test (0 / {points:g} points). "
                          "Did the notebook stop, or was the check changed, before this cell ran?") from None
    outcomes = []
    for data, case in zip(record["outcomes"], cases):
        outcome, device = decode_outcome(data)
        case.like._recorded_device = device  # the inputs' device where the student's code ran (None: unknown)
        outcomes.append(outcome)
    names = sorted(set(forbidden.values()))
    recorded = [n for n in record.get("forbidden", []) if n in names]
    found = replay.forbidden_uses(fn, names)
    return outcomes, list(dict.fromkeys(recorded + found))
