"""Judging outcomes: references, comparisons, diagnoses, hints and the report nbgrader reads.

The same code judges in the student's own notebook (right after the probe) and in the grader
(on the outcomes a grading kernel recorded). A report turns into what nbgrader reads:

* every case passes      -> prints one line, returns None     (full points)
* some credit            -> prints a report, returns a number (partial credit)
* no credit              -> raises CheckFailed with the report (0 points)
"""
from __future__ import annotations

import builtins
import functools
import importlib
import importlib.util
import math
import numbers
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import torch

from .. import core, modules as course_modules
from ..allowlist import ALLOWED_INSTEAD, OUTSIDE
from ..core import (ALWAYS_FORBIDDEN, DEVICE, NOT_IMPLEMENTED, STRUCTURE_SHARE, TOLERANCES, CheckFailed,
                    PartialCredit, _dtype_name, quiet, tolerance)
from ..localise import Call, Ladder, decode_ladder
from ..published import PUBLISHED, NotPublished
from ..record import Outcome, decode_outcome, device_name
from .catalogue import Answer, Mistake, merge_twins, named_mistakes, one_of
from .crashes import CRASHES
from .localising import Rung, finding, varies
from .hints import (KEPT_STATE_HINT, Claim, crash_hints, device_bug, device_hints, kept_from_an_earlier_call,
                    pattern_hints, split_error, structure_hints)
from .torch_messages import pytorch_message

if TYPE_CHECKING:
    from ..cases import Inputs, Spec
    from ..registry import Check


def answer_for(check: "Check") -> Answer:
    return importlib.import_module(check.answers_module).ANSWERS[check.name]


def case_key(case: Mapping[str, Any]) -> str:
    """A case as its test cell writes it, in one string: what names it in the published data."""
    return repr(sorted((str(k), repr(v)) for k, v in case.items()))


class References:
    """Where a check's answers come from when its answers module is installed (the grader, a clone
    of the course): computed here, in float64, by the module's reference and mistakes."""

    def expected(self, check: "Check", key: str, x: "Inputs", spec: "Spec") -> dict[str, Any]:
        return answer_for(check).reference(x, spec)

    def __init__(self):
        self._mistakes: dict[tuple[int, str], list[Mistake]] = {}

    def mistakes(self, check: "Check", case: "Judged") -> list[Mistake]:
        """A case's known mistakes, computed once per process (as its Judged form is)."""
        key = (id(check), case.key)
        if key not in self._mistakes:
            with quiet():
                self._mistakes[key] = list(merge_twins(answer_for(check).mistakes(case.x, case.spec,
                                                                                  case.expected)).values())
        return self._mistakes[key]

    def structure_share(self, check: "Check", key: str) -> float:
        return answer_for(check).structure_share


REFERENCES = References()


def default_source(check: "Check"):
    """The references where the check's answers module is installed; else (what students install)
    the answers the course published for its visible cases (``attention_checks.published``)."""
    if importlib.util.find_spec(check.answers_module) is not None:
        return REFERENCES
    return PUBLISHED


@dataclass(frozen=True)
class Judged:
    """A case as the judge sees it: its inputs (float64, CPU), description and reference."""

    spec: dict
    x: "Inputs"
    dtype: torch.dtype  # the inputs' dtype: what the outputs must have, and their tolerance
    shown: str
    expected: dict[str, Any]
    sizes: frozenset[int]  # the case's own numbers: its inputs' and outputs' sizes, its spec's integers
    key: str = ""  # the case as the published data names it (case_key)
    source: Any = REFERENCES  # where its expected outputs, mistakes and structure share come from


def _sizes(*values: Any) -> set[int]:
    found: set[int] = set()
    for value in values:
        if isinstance(value, torch.Tensor):
            found |= set(value.shape)
        elif isinstance(value, (tuple, list)):
            found |= _sizes(*value)
        elif isinstance(value, dict):
            found |= _sizes(*value.values())
        elif isinstance(value, int) and not isinstance(value, bool):
            found.add(abs(value))
    return found


_JUDGED: dict[tuple[int, int, str], Judged] = {}


def judged(check: "Check", case: Mapping[str, Any], source: Any = None) -> Judged:
    """A case's judged form, built once per process: every student is judged against the same
    cases. Nothing here is ever handed to student code (the probe builds its own inputs).
    `source`: where the answers come from (default_source)."""
    source = source or default_source(check)
    name = case_key(case)
    key = (id(check), id(source), name)
    if key not in _JUDGED:
        spec, inputs = check.spec(case), check.build(case)
        like = inputs.like
        x = inputs.as_reference()
        expected = source.expected(check, name, x, spec)
        dtype = like.dtype if like is not None else torch.float32
        sizes = frozenset(_sizes(x.named, x.extra, spec, expected) | set(range(10)))
        _JUDGED[key] = Judged(spec, x, dtype, check.describe(inputs, spec), expected, sizes, name, source)
    return _JUDGED[key]


# --------------------------------------------------------------------------
# comparing one output


@dataclass
class Verdict:
    structure_ok: bool  # a tensor of the right shape, dtype and device
    values_ok: bool
    line: str  # e.g. "shape (2, 5, 4) ok; values differ: max abs error 0.31 (allowed 0.005 + 0.005·|expected|)"
    details: list[str] = field(default_factory=list)  # lines under it (token ids side by side)

    def fraction(self, structure_share: float = STRUCTURE_SHARE) -> float:
        earned = structure_share * self.structure_ok + (1 - structure_share) * self.values_ok
        # right values of the wrong dtype or device lose the structure's share whatever it earns when
        # values are wrong: the contract's dtype is part of the answer (issue 58: int32 tokens where
        # the contract says int64 earned full marks where a right structure is worth nothing)
        return earned if self.structure_ok else min(earned, 1 - STRUCTURE_SHARE)


def _as_float64(got: Any) -> torch.Tensor | None:
    try:
        return got.detach().to("cpu", torch.float64, copy=True)
    except Exception:  # noqa: BLE001 - e.g. a meta tensor, a complex one
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


def _distance(got: Mapping[str, Any], outputs: Mapping[str, Any]) -> float:
    """The largest absolute difference between the student's outputs and `outputs` (plain values: 0)."""
    worst = 0.0
    for name, out in outputs.items():
        value = got.get(name)
        if isinstance(out, torch.Tensor) and isinstance(value, torch.Tensor) and (value := _as_float64(value)) is not None:
            difference = (value - out.to(torch.float64)).abs().nan_to_num(0.0)
            worst = max(worst, difference.max().item() if difference.numel() else 0.0)
    return worst


def close(got: Any, expected: Any, dtype: torch.dtype, equal_nan: bool = False) -> bool:
    """Same shape and values within the tolerances of `dtype` (the inputs' dtype)."""
    if not isinstance(expected, torch.Tensor):
        return same_plain(got, expected)
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(expected.shape):
        return False
    got = _as_float64(got)
    return got is not None and torch.allclose(got, expected.to(torch.float64), equal_nan=equal_nan, **tolerance(dtype))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# --------------------------------------------------------------------------
# how a report quotes the student's code
#
# A report quotes what the student's code raised and returned: an error's message and the line it
# raised at, a returned value, its type's name, shape and length, its token ids, how far its values
# are off, and numbers that a hint reads off these. Once a grading kernel has run a hidden test,
# the student's code may hold the test's source (a hook sees every cell compiled) and put it in
# any of these. From then on the grader words its reports with `Sealed`: only what the student's
# code could not have chosen freely, each a pick among a few.


class Quoting:
    """As it is: in the student's own notebook, and in the grader before any hidden test ran."""

    tokens = True  # the student's token ids named in a pattern's words

    def error(self, first: str, line: str = "", sizes: frozenset[int] = frozenset()) -> str:
        """The first line of what a case raised ("raised Type: message"; `line`: the student's line
        it raised at, "" if none)."""
        return first

    def line(self, line: str) -> str:
        """The student's line it raised at ("": not shown)."""
        return line

    def function(self, name: str) -> str:
        """The name of the student's function or method ("LayerNorm.forward") a line is in ("": not shown)."""
        return name

    def arguments(self, data: Any, sizes: frozenset[int]) -> Any:
        """A recorded call's arguments (``localise.Call.arguments``), which a finding may run again with
        one change and quote (None: not used; ``sizes``: the case's own numbers)."""
        return data

    def value(self, got: Any) -> str:
        return _short(got)

    def type_name(self, got: Any) -> str:
        return type(got).__name__

    def size(self, n: int, sizes: frozenset[int]) -> str:
        """A length, a count or one size of a shape that the student's code made."""
        return str(n)

    def shape(self, shape: Sequence[int], sizes: frozenset[int]) -> str:
        return str(tuple(shape))

    def magnitude(self, x: float) -> str:
        return f"{x:.3g}"

    def hint(self, text: str, sizes: frozenset[int]) -> str:
        """A hint that quotes numbers read off the code's error or outputs."""
        return text


AS_IS = Quoting()


class Sealed(Quoting):
    """Nothing the student's code chose freely: an exception's type when Python, PyTorch or the
    course defines it (no message), the line it raised at when it is one of the student's own
    lines (`own_lines`), types of Python's own, sizes and counts when they are the case's own
    numbers (its inputs' and outputs' sizes, its spec's integers, 0 to 9; else "?"), other numbers
    (how far values are off, a returned number, a number a hint reads off an error) to two
    significant digits, and token ids as sizes (pattern words name none). What a case's report says
    is then a pick among a few."""

    tokens = False
    NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w.])")

    def __init__(self, own_lines: Iterable[str]):
        self.own_lines = frozenset(line.strip() for line in own_lines if line.strip())

    def error(self, first: str, line: str = "", sizes: frozenset[int] = frozenset()) -> str:
        if first == NOT_IMPLEMENTED:
            return first
        name = re.match(r"raised ([A-Za-z_]\w*)(?:: (.*))?", first)
        if not name or name[1] not in known_exceptions():
            return "raised an exception"
        # PyTorch's own words, where PyTorch raised them (not a raise of the student's line)
        said = None if line.lstrip().startswith("raise") or name[2] is None else \
            pytorch_message(name[2], lambda n: self.size(n, sizes))
        return f"raised {name[1]}" + (f": {said}" if said else "")

    def line(self, line: str) -> str:
        return line if line.strip() in self.own_lines else ""

    def function(self, name: str) -> str:
        # each part defined by a line of the student's own ("class LayerNorm(", "def forward(")
        defined = {re.match(r"(?:async\s+)?(?:def|class)\s+(\w+)", line) for line in self.own_lines}
        return name if name and set(name.split(".")) <= {match[1] for match in defined if match} else ""

    def arguments(self, data: Any, sizes: frozenset[int]) -> Any:
        # only arguments whose every number is the case's own (0 to 9 among them) or its negative (a dim
        # counted from the end), as an integer or a float, or an infinity: a pick among a few
        def small(item: Any) -> bool:
            if isinstance(item, list):
                return all(map(small, item))
            if isinstance(item, dict) and "float" in item:  # a whole number of them (2.0), or an infinity (a fill)
                try:
                    x = float(str(item["float"])[:40])
                except ValueError:
                    return False
                return math.isinf(x) or x.is_integer() and abs(int(x)) in sizes
            if not isinstance(item, dict):
                return item is True  # {"ellipsis": True}
            if "plain" in item:
                plain = item["plain"]
                return plain is None or type(plain) in (bool, int) and abs(plain) in sizes
            # a dtype's name is one of PyTorch's (the grader reads no other)
            return all(small(value) for key, value in item.items() if key not in ("call", "given", "kind", "item", "dtype"))
        return data if small(data) else None

    def value(self, got: Any) -> str:
        if got is None or isinstance(got, bool):
            return repr(got)
        if isinstance(got, numbers.Real):
            return self.magnitude(float(got)) if math.isfinite(got) else repr(float(got))
        return f"a {self.type_name(got)}"

    def type_name(self, got: Any) -> str:
        kind = type(got)
        return kind.__name__ if kind.__module__ == "builtins" or kind is torch.Tensor else "object of another type"

    def size(self, n: int, sizes: frozenset[int]) -> str:
        return str(n) if n in sizes else "?"

    def shape(self, shape: Sequence[int], sizes: frozenset[int]) -> str:
        return f"({', '.join(self.size(n, sizes) for n in shape)}{',' * (len(shape) == 1)})"

    def magnitude(self, x: float) -> str:
        return f"{x:.2g}"

    def hint(self, text: str, sizes: frozenset[int]) -> str:
        def sealed(number: re.Match) -> str:
            value = float(number[0])
            return number[0] if value.is_integer() and int(value) in sizes else self.magnitude(value)
        return self.NUMBER.sub(sealed, text)


@functools.cache
def known_exceptions() -> frozenset[str]:
    """The names of the exception types of Python's builtins, PyTorch's top-level and linalg
    namespaces and the course's own (``core`` and ``modules`` define every exception a check
    raises; tests/test_check_machinery.py holds the checks to that): a notebook's own types are not
    among them."""
    modules = [builtins, torch, torch.linalg, core, course_modules]
    return frozenset(value.__name__ for module in modules for value in vars(module).values()
                     if isinstance(value, type) and issubclass(value, BaseException))


# --------------------------------------------------------------------------
# token ids: an integer output is read position by position, not as numbers
#
# A check whose output is a sequence of token ids (shift_right, greedy_decode, ...) needs nothing
# of its own: `compare` reports any integer tensor this way. `token_lines(got, expected)` is the
# same report for other uses; `token_pattern(got, expected)` only the pattern's words.


def is_tokens(value: Any) -> bool:
    """An integer tensor (not bool) of at least one dimension: token ids, one sequence per row."""
    return isinstance(value, torch.Tensor) and value.dim() >= 1 and not value.is_floating_point() \
        and not value.is_complex() and value.dtype != torch.bool


def _rows(t: torch.Tensor) -> torch.Tensor:
    """(sequences, length) int64 on the CPU: every leading axis is a sequence, the last the positions."""
    t = t.detach().to("cpu", torch.int64)
    # math.prod, not -1: a batch of empty sequences (shape (2, 0)) has no size -1 could infer
    return t.reshape(math.prod(t.shape[:-1]), t.shape[-1]) if t.dim() > 1 else t[None]


def _equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.numel() > 0 and bool((a == b).all())


def token_pattern(got: torch.Tensor, expected: torch.Tensor, quoting: Quoting = AS_IS) -> str | None:
    """What the difference between two batches of token sequences (..., T) looks like, in words, or
    None when it has no simple pattern: shifted by one, a token too many or too few at either end,
    only the first or the last position wrong (the tokens there named where `quoting` shows tokens)."""
    listed = _listed if quoting.tokens else (lambda column: "other tokens")
    if got.dim() != expected.dim() or got.shape[:-1] != expected.shape[:-1] or expected.shape[-1] == 0:
        return None
    g, e = _rows(got), _rows(expected)
    n, k = g.shape[-1], e.shape[-1]
    if n > k:
        extra = n - k
        if _equal(g[:, :k], e):
            return f"the expected tokens, then {extra} more: the sequences end late ({extra} too many at the end)"
        if _equal(g[:, extra:], e):
            return f"{extra} extra token{'s' * (extra > 1)} in front, then the expected ones"
        return None
    if n < k:
        short = k - n
        if n and _equal(g, e[:, :n]):
            return f"the first {n} tokens are right: the sequences end early ({short} missing at the end)"
        if n and _equal(g, e[:, short:]):
            return f"the first {short} expected token{'s' * (short > 1)} missing, the rest right"
        return None
    # one wrong position first: in a run of equal tokens it also reads as a shift, which it is not
    wrong = (g != e).any(0)
    if k > 1 and wrong.tolist() == [True] + [False] * (k - 1):
        return f"only position 0 differs: {listed(g[:, 0])} where {_listed(e[:, 0])} is expected"
    if k > 1 and wrong.tolist() == [False] * (k - 1) + [True]:
        return f"only the last position differs: {listed(g[:, -1])} where {_listed(e[:, -1])} is expected"
    if k > 1 and _equal(g[:, :-1], e[:, 1:]):
        return "every token sits one position to the left of where it belongs (shifted left by one)"
    if k > 1 and _equal(g[:, 1:], e[:, :-1]):
        first = "" if _equal(g[:, 0], e[:, 0]) else f", and position 0 holds {listed(g[:, 0])}, not {_listed(e[:, 0])}"
        return f"every token sits one position to the right of where it belongs (shifted right by one){first}"
    return None


def _listed(column: torch.Tensor) -> str:
    values = list(dict.fromkeys(column.tolist()))
    return str(values[0]) if len(values) == 1 else "tokens " + ", ".join(map(str, values[:4])) + (
        ", ..." if len(values) > 4 else "")


def token_lines(got: torch.Tensor, expected: torch.Tensor, rows: int = 2, quoting: Quoting = AS_IS,
                sizes: frozenset[int] = frozenset(), width: int = 20, blocks: int = 2) -> tuple[str, list[str]]:
    """A report on token ids (..., T) that differ from the expected ones: a summary ("tokens differ at
    4 of 10 positions: <pattern>") and, for the first `rows` sequences that differ, the expected and
    the student's tokens aligned, a ^ under each position that differs, `width` positions a block
    (the first `blocks` blocks where they differ, each labelled with its first position):

        sequence 0  expected   1   4   7   3
                    got        4   7   3   1
                               ^   ^   ^   ^

    The student's tokens quoted as `quoting` quotes sizes (`Sealed`: those that are not the case's
    own numbers, `sizes`, as "?")."""
    g, e = _rows(got), _rows(expected)
    pattern = token_pattern(got, expected, quoting)
    if g.shape[0] != e.shape[0]:
        return (pattern or f"{quoting.size(g.shape[0], sizes)} sequences, expected {e.shape[0]}"), []
    n, k = g.shape[-1], e.shape[-1]
    common = min(n, k)
    wrong = torch.zeros(g.shape[0], max(n, k), dtype=torch.bool)
    wrong[:, :common] = g[:, :common] != e[:, :common]
    wrong[:, common:] = True  # a position only one side has
    summary = f"tokens differ at {int(wrong.sum())} of {wrong.numel()} positions" if n == k else \
        f"{quoting.size(n, sizes)} tokens per sequence, expected {k}"
    summary += f": {pattern}" if pattern else ""
    quoted = lambda values: [quoting.size(v, sizes) if v >= 0 else str(v) for v in values.tolist()]  # noqa: E731
    shown = [i for i in range(g.shape[0]) if wrong[i].any()]
    cells = {i: (list(map(str, e[i].tolist())), quoted(g[i])) for i in shown[:rows]}
    wide = max([len(c) for ex, gt in cells.values() for c in ex + gt] + [1])
    line = lambda values, start: " ".join(f"{v:>{wide}}" for v in values[start:start + width]).rstrip()  # noqa: E731
    details: list[str] = []
    for i, (ex, gt) in cells.items():
        label = f"sequence {i}"
        marks = ["^" if w else "" for w in wrong[i].tolist()]
        differing = [start for start in range(0, max(n, k), width) if any(marks[start:start + width])]
        for start in differing[:blocks]:  # the blocks where they differ, each from its first position
            head = label if start == 0 else f"{f'from {start}':>{len(label)}}"
            details += [f"{head}  expected  {line(ex, start)}".rstrip(),
                        f"{'':{len(label)}}  got       {line(gt, start)}".rstrip(),
                        f"{'':{len(label)}}            {line(marks, start)}".rstrip()]
        if len(differing) > blocks:
            details.append(f"{'':{len(label)}}  ... and {len(differing) - blocks} more block(s) of {width} "
                           "positions that differ")
    if len(shown) > rows:
        details.append(f"... and {len(shown) - rows} more sequence(s) that differ")
    return summary, details


def compare(got: Any, expected: Any, dtype: torch.dtype, device: str, quoting: Quoting = AS_IS,
            sizes: frozenset[int] = frozenset()) -> Verdict:
    """One output against its reference; `device` is where the inputs were when the code ran;
    `quoting`: how the line quotes `got` (`sizes`: the case's own numbers, for `Sealed`)."""
    if not isinstance(expected, torch.Tensor):
        ok = same_plain(got, expected)
        return Verdict(ok, ok, "ok" if ok else f"got {quoting.value(got)}, expected {_short(expected)}")
    if not isinstance(got, torch.Tensor):
        return Verdict(False, False, f"expected a tensor, got {quoting.type_name(got)}")
    shape, want = tuple(got.shape), tuple(expected.shape)
    tokens = is_tokens(expected)
    if shape != want:
        summary, details = token_lines(got, expected, quoting=quoting, sizes=sizes) if tokens else ("", [])
        return Verdict(False, False, f"shape {quoting.shape(shape, sizes)}, expected {want}"
                       + (f"; {summary}" if summary else ""), details)
    problems = []
    want_dtype = dtype if expected.is_floating_point() else expected.dtype
    if got.dtype != want_dtype:
        problems.append(f"dtype {_dtype_name(got.dtype)}, expected {_dtype_name(want_dtype)}")
    if device_name(got) != device:
        problems.append(f"on {device_name(got)}, expected {device} (the input's device)")
    structure_ok = not problems

    tol = tolerance(dtype)
    values = _as_float64(got)
    if values is None:
        return Verdict(structure_ok, False, "; ".join([f"shape {shape} ok", *problems, "values cannot be read"]))
    details = []
    values_ok = torch.allclose(values, expected.to(torch.float64), **tol)
    if not values_ok and tokens:
        summary, details = token_lines(got, expected, quoting=quoting, sizes=sizes)
        problems.append(summary)
    elif not values_ok:
        expected = expected.to(torch.float64)
        finite = expected.isfinite() & values.isfinite()
        nonfinite = int((values.isnan() | (values.isinf() != expected.isinf())).sum())
        text = "values differ"
        if finite.any() and (values - expected)[finite].abs().max().item() > 0:
            err = (values - expected)[finite].abs().max().item()
            text += f": max abs error {quoting.magnitude(err)} (allowed {tol['atol']:g} + {tol['rtol']:g}·|expected|)"
        if nonfinite:
            text += f"{',' if ':' in text else ':'} {quoting.size(nonfinite, sizes)} NaN/inf where the reference has none"
        problems.append(text)
    line = "; ".join([f"shape {shape} ok", *problems] + (["values ok"] if values_ok else []))
    return Verdict(structure_ok, values_ok, line, details)


# How far a float64 result with float32 inside it is off, observed: either every value is a float32
# (computed in float32, cast back), off by what float32 allows (TF32 on a GPU included), or off by
# float32's rounding only (6e-8 of a value, some 1e-5 of the values' scale, at least 1, after a few
# hundred operations: float32 constants or buffers in float64 code). A bug's error is neither (an online
# softmax whose running sum starts at 1, in float64 throughout: 5e-3, within float32's tolerance).
FLOAT32_ROUNDING = 2e-5


def _float32_only(got: Mapping[str, Any], expected: Mapping[str, Any], dtype: torch.dtype) -> bool:
    """float64 inputs whose outputs agree to float32 precision only, and show float32 inside:
    float32 values within float32's tolerance, or float64 values within float32's rounding."""
    def float32_inside(value: Any, e: Any) -> bool:
        if not (isinstance(e, torch.Tensor) and isinstance(value, torch.Tensor)
                and tuple(value.shape) == tuple(e.shape)):
            return False
        value, e = _as_float64(value), e.to(torch.float64)
        if value is None or not bool(value.isfinite().all()) or not bool(e.isfinite().all()):
            return False
        if bool((value.to(torch.float32).to(torch.float64) == value).all()):  # float32 values, cast back
            return torch.allclose(value, e, **TOLERANCES[torch.float32])
        scale = max(e.abs().max().item() if e.numel() else 0.0, 1.0)  # (a reference of zeros: the inputs' 1)
        return bool(((value - e).abs() <= FLOAT32_ROUNDING * scale).all())

    return dtype == torch.float64 and all(float32_inside(got.get(n), e) for n, e in expected.items())


def diagnose(got: Mapping[str, Any], case: Judged, check: "Check", wrong: set[str],
             quoting: Quoting = AS_IS) -> list[str]:
    """Hints of the known mistakes that explain the outputs in `wrong`, first match first (else
    what the failing pattern says, its numbers quoted as `quoting` allows)."""
    hints = []
    mistakes = case.source.mistakes(check, case)

    def claimed(mistake: Mistake) -> dict[str, Any]:
        return {name: out for name, out in mistake.outputs.items() if out is not None}

    def explains(mistake: Mistake) -> bool:
        """The bug reproduces every output it determines, and differs from the reference somewhere."""
        outputs = claimed(mistake)
        return all(close(got.get(name), out, case.dtype, equal_nan=True) for name, out in outputs.items()) and any(
            not close(out, case.expected[name], case.dtype, equal_nan=True) for name, out in outputs.items())

    for index, mistake in enumerate(mistakes):
        if mistake.fits is not None:  # a test on the student's outputs, not one output to compare
            if mistake.outputs.keys() & wrong and mistake.fits(got):
                # one that draws at random is a claim the localising cases can refute (refuted_by_ladder)
                drawn = any(part.draws for part in mistake.members)
                hints.append(Claim(mistake.hint, named_mistakes(mistake.hint)) if drawn else mistake.hint)
                wrong = wrong - mistake.outputs.keys()
                if not wrong:
                    break
            continue
        outputs = claimed(mistake)
        if not outputs.keys() & wrong or not explains(mistake):
            continue
        # other bugs close enough to the same outputs at this case's tolerance are as likely: named
        # beside it, the closest first (a student's own mistake is usually exact, a look-alike near)
        alike = [mistake] + [other for other in mistakes[index + 1:] if other.fits is None
                             and claimed(other).keys() == outputs.keys() and explains(other)]
        alike.sort(key=lambda m: _distance(got, claimed(m)))
        text = one_of(m.hint for m in alike)
        hints.append(Claim(text, named_mistakes(text)))
        wrong = wrong - outputs.keys()
        if not wrong:
            break
    if not hints and _float32_only(got, case.expected, case.dtype):
        hints.append("Your values agree with the reference to float32 precision only: compute float64 inputs "
                     "in float64 (no .float(), no float32 constants or buffers).")
    if not hints:  # no known mistake: what the failing pattern itself says
        masks = {n: v for n, v in case.x.named.items() if "mask" in n and v is not None}
        for name in sorted(wrong):
            hints += [_worded(h, quoting.hint(h, case.sizes))
                      for h in pattern_hints(name, got.get(name), case.expected[name], masks)]
    return list(dict.fromkeys(hints))  # several outputs with one pattern: its hint once


def _worded(hint: str, text: str) -> str:
    """``text``, a hint as a report quotes it, keeping the claim ``hint`` makes (if it is one)."""
    return hint.worded(text) if isinstance(hint, Claim) else text


def _crash_hints(check: "Check", case: Judged, error: str) -> list[str]:
    reading = CRASHES.get(check.name)
    with quiet():
        own = reading(case.x, case.spec, error) if reading else []
    state = case.x.extra.get("state")
    state = state if isinstance(state, Mapping) and state else None  # the weights the test loads, if any
    return own or crash_hints(error, case.x.named, state)  # the check's own reading of a crash is the sharper one


# --------------------------------------------------------------------------
# judging one case


@dataclass
class CaseResult:
    fraction: float
    lines: list[str] = field(default_factory=list)  # what went wrong; empty when the case passes
    hints: list[str] = field(default_factory=list)
    not_implemented: bool = False
    # what the judge verifies a claim on across cases: the outputs whose values are wrong (every
    # output where the code raised or returned the wrong kind of thing) and the student's outputs
    wrong: frozenset[str] = frozenset()
    got: dict[str, Any] = field(default_factory=dict)


def _unpack(result: Any, names: Sequence[str], quoting: Quoting, sizes: frozenset[int]) -> tuple[dict[str, Any], str | None]:
    if len(names) == 1:
        return {names[0]: result}, None
    if not isinstance(result, (tuple, list)) or len(result) != len(names):
        what = f"a {quoting.type_name(result)}" + (f" of length {quoting.size(len(result), sizes)}"
                                                   if isinstance(result, (tuple, list)) else "")
        return {}, f"expected a tuple ({', '.join(names)}), got {what}"
    return dict(zip(names, result)), None


IN_PLACE_HINT = ("Your code changes its input in place (an operation ending in _, such as masked_fill_, or "
                 "x[...] = ...): the caller's tensor changes too. Work on a new tensor (masked_fill, x.clone()).")


def _quoted_error(error: str, quoting: Quoting, sizes: frozenset[int]) -> tuple[str, str, str]:
    """A probe's error as `quoting` shows it: its first line and its line (`at:`, or ""), the
    exception's own further lines (overloads...) left out; and the error as the hints may read it
    (without its line where that is not shown)."""
    first, line = split_error(error)
    shown = quoting.line(line)
    return quoting.error(first, line, sizes), shown, error if shown == line else first


def _undefined(error: str, not_run: Mapping[str, str]) -> list[str]:
    """What to say of a NameError for a name that a cell which does not compile defines."""
    found = re.match(r"raised NameError: name '([A-Za-z_]\w*)' is not defined", error)
    said = not_run.get(found[1]) if found else None
    return [f"{said[0].upper()}{said[1:]}, so `{found[1]}` does not exist: fix that line and run the cell."] \
        if said else []


def judge_case(check: "Check", outcome: Outcome, case: Judged, device: str, quoting: Quoting = AS_IS,
               not_run: Mapping[str, str] | None = None) -> CaseResult:
    """One case: its share of the points, and what went wrong, quoted as `quoting` allows
    (`not_run`: names that cells which do not compile define -> what to say of their cell)."""
    seal = lambda hints: [quoting.hint(h, case.sizes) for h in hints]  # noqa: E731 - hints read off the code's error
    everything = frozenset(case.expected)
    if outcome.error is not None:
        first, line, read = _quoted_error(outcome.error, quoting, case.sizes)
        undefined = _undefined(read, not_run or {})  # the grader's words of the student's source: not sealed
        if undefined:
            return CaseResult(0.0, [first] + ([f"  at: {line}"] if line else []), undefined, wrong=everything)
        hints = ([] if outcome.not_implemented else
                 [KEPT_STATE_HINT] if kept_from_an_earlier_call(read, device) else
                 device_hints(read, case.x.named, check.kind) if device_bug(read) else
                 _crash_hints(check, case, read))
        return CaseResult(0.0, [first] + ([f"  at: {line}"] if line else []), seal(hints),
                          not_implemented=outcome.not_implemented, wrong=everything)
    if device_bug(outcome.meta_error):
        # ran on the CPU, but on a GPU it crashes (probe.on_meta): judged as a GPU grader judges it, a crash
        _, line, read = _quoted_error(outcome.meta_error, quoting, case.sizes)
        lines = ["raised RuntimeError on a GPU: a tensor on the CPU meets the inputs on cuda"]
        return CaseResult(0.0, lines + ([f"  at: {line}"] if line else []),
                          seal(device_hints(read, case.x.named, check.kind)), wrong=everything)
    # what the reference gives, in its order: usually check.outputs, but a case may judge something else
    # (a module's parameter names, whether the weights are None)
    names = list(case.expected)
    got, problem = _unpack(outcome.value, names, quoting, case.sizes)
    if problem:
        return CaseResult(0.0, [problem], wrong=everything)
    verdicts = {name: compare(got[name], case.expected[name], case.dtype, device, quoting, case.sizes)
                for name in names}
    share = case.source.structure_share(check, case.key)
    idle = {name: why for name, v in verdicts.items() if v.structure_ok and not v.values_ok
            for why in [no_work(got[name], case.expected[name], case)] if why}
    fraction = sum(v.fraction(0.0 if name in idle else share) for name, v in verdicts.items()) / len(verdicts)
    width = max(map(len, names))
    lines = [text for name, v in verdicts.items()
             for text in [f"{name:<{width}} : {v.line}" + (f"; {idle[name]}" if name in idle else ""),
                          *(" " * (width + 3) + d for d in v.details)]] \
        if fraction < 1 else []
    hints = []
    if outcome.modified:
        fraction = min(fraction, STRUCTURE_SHARE)
        changed = [name for name in outcome.modified if name in case.x.named] or ["an input"]  # (the probe names inputs)
        lines.append(f"changed {', '.join(changed)} in place")
        hints.append(IN_PLACE_HINT)
    if fraction == 1:
        return CaseResult(1.0)
    wrong = {name for name, v in verdicts.items() if not v.values_ok}
    if wrong:
        hints = diagnose(got, case, check, wrong, quoting) + hints
    misfits = {name: got[name] for name, v in verdicts.items()  # the right shape, the wrong dtype or device
               if not v.structure_ok and isinstance(case.expected[name], torch.Tensor)
               and isinstance(got[name], torch.Tensor) and tuple(got[name].shape) == tuple(case.expected[name].shape)}
    want = {n: case.dtype if case.expected[n].is_floating_point() else case.expected[n].dtype for n in misfits}
    return CaseResult(fraction, lines, hints + structure_hints(misfits, want, device, case.dtype),
                      wrong=frozenset(wrong), got=got)


def no_work(got: Any, expected: Any, case: Judged) -> str | None:
    """Why an output of the right structure but wrong values took no work, in words, or None: it is
    one of the case's inputs as it was given, or it holds one value everywhere (zeros from a stub)
    where the reference's does not. Such an output earns nothing for its shape (issue 58: handing
    q back earned a quarter of flash_attention's points); any output computed from the inputs does."""
    values = _as_float64(got)
    if values is None or values.numel() < 2 or not isinstance(expected, torch.Tensor):
        return None
    for name, given in case.x.named.items():  # as the code was given it: in the case's dtype
        if isinstance(given, torch.Tensor) and tuple(given.shape) == tuple(values.shape) and torch.equal(
                values, (given.to(case.dtype) if given.is_floating_point() else given).to(torch.float64)):
            return f"that is the input {name} as it was given, which earns nothing for its shape"
    if not varies(values) and varies(expected):
        return "one value everywhere, which earns nothing for its shape"
    return None


# --------------------------------------------------------------------------
# every diagnosis checked across the failing cases before it is shown (issue 59)


def refuted_mistakes(check: "Check", built: Sequence[Judged], results: Sequence[CaseResult]) -> set[str]:
    """The known mistakes (by hint) that the failing cases refute, because they are not what the code
    does:

    * a mistake whose outputs are the reference's, in an output a failing case gets wrong: the
      mistake alone would pass that case (a top-k taken from the wrong end matches "top-p first"
      where top-p hides the difference, and fails where only top-k applies);
    * a mistake that would fail the cases too, but gives other values than the code on more failing
      cases than it gives the code's: matched by chance on one case (a frequency index from one
      rotates a single position by almost nothing, as code that ignores the positions does), it
      parts from the code on the others. A case counts for a mistake where any of its forms (the
      same hint) gives the code's values, against it where none does. A catalogued form need not
      cover every case (a mask inverted in each of two masks, where the form inverts their union),
      hence a majority, not every case. Only entries finite in both are compared (a row with every
      key masked is another matter, which its own hint says), and an output the code did not
      return (it raised) says nothing."""
    refuted: set[str] = set()
    reproduced: dict[str, int] = {}
    contradicted: dict[str, int] = {}
    for case, result in zip(built, results):
        if result.fraction >= 1 or not result.wrong:
            continue
        gives, parts = set(), set()
        for mistake in case.source.mistakes(check, case):
            outputs = {name: out for name, out in mistake.outputs.items() if out is not None}
            if mistake.fits is not None or not outputs:
                continue
            named = named_mistakes(mistake.hint)
            if all(close(out, case.expected[name], case.dtype, equal_nan=True) for name, out in outputs.items()):
                if outputs.keys() & result.wrong:
                    refuted.update(named)
            elif all(close(result.got.get(name), out, case.dtype, equal_nan=True) for name, out in outputs.items()):
                gives.update(named)
            elif any(name in result.got and _differ_where_finite(result.got[name], out, case.dtype)
                     for name, out in outputs.items()):
                parts.update(named)
        for name in gives:
            reproduced[name] = reproduced.get(name, 0) + 1
        for name in parts - gives:
            contradicted[name] = contradicted.get(name, 0) + 1
    return refuted | {name for name, count in contradicted.items() if count > reproduced.get(name, 0)}


def _differ_where_finite(got: Any, out: Any, dtype: torch.dtype) -> bool:
    """Whether the code's output and a mistake's differ: in kind or shape, or in an entry that is
    finite in both (beyond the tolerance of ``dtype``)."""
    if not isinstance(out, torch.Tensor):
        return not same_plain(got, out)
    got = _as_float64(got) if isinstance(got, torch.Tensor) else None
    if got is None or tuple(got.shape) != tuple(out.shape):
        return True
    out = out.to(torch.float64)
    both = got.isfinite() & out.isfinite()
    return not torch.allclose(got[both], out[both], **tolerance(dtype))


def common_factor(built: Sequence[Judged], results: Sequence[CaseResult]) -> float | None:
    """The one factor c (least squares over every failing case) for which the student's wrong outputs
    are c times the reference's within each case's tolerance, or None where no factor fits them all
    (ALiBi's slopes of another base: one head's bias is a multiple of the reference, several heads'
    are not)."""
    pairs = []
    for case, result in zip(built, results):
        if result.fraction >= 1 or not result.wrong:
            continue
        for name in result.wrong:
            got, expected = result.got.get(name), case.expected.get(name)
            got = _as_float64(got) if isinstance(got, torch.Tensor) else None
            if got is None or not isinstance(expected, torch.Tensor) or got.shape != expected.shape:
                return None  # a crash, a wrong shape: no factor explains it
            pairs.append((got, expected.to(torch.float64), case.dtype))
    scale = sum(float((e * e).sum()) for _, e, _ in pairs)
    if not pairs or scale == 0:
        return None
    c = sum(float((g * e).sum()) for g, e, _ in pairs) / scale
    return c if all(torch.allclose(g, c * e, **tolerance(dtype)) for g, e, dtype in pairs) else None


def first_difference(name: str, got: Any, expected: Any, dtype: torch.dtype, quoting: Quoting,
                     sizes: frozenset[int]) -> str | None:
    """Where an output first differs from the reference (its index), and in how many entries."""
    got = _as_float64(got) if isinstance(got, torch.Tensor) else None
    if got is None or not isinstance(expected, torch.Tensor) or got.shape != expected.shape or not got.dim():
        return None
    tol = tolerance(dtype)
    expected = expected.to(torch.float64)
    off = ~((got - expected).abs() <= tol["atol"] + tol["rtol"] * expected.abs())
    if not bool(off.any()):
        return None
    index = [int(i) for i in off.nonzero()[0]]
    where = "(" + ", ".join(quoting.size(i, sizes) for i in index) + ("," if len(index) == 1 else "") + ")"
    return (f"{name} first differs at index {where}; {quoting.size(int(off.sum()), sizes)} of "
            f"{quoting.size(off.numel(), sizes)} entries differ")


def verify_claims(check: "Check", built: Sequence[Judged], results: Sequence[CaseResult],
                  quoting: Quoting = AS_IS, ladder: Ladder | None = None) -> None:
    """Withdraw every diagnosis that a failing case contradicts (``refuted_mistakes``, and the same on
    the check's localising cases, ``refuted_by_ladder``; a constant factor that not every failing
    case fits); a case left without a hint says instead where its outputs first differ (the case's
    inputs are on its own line)."""
    claims = [h for r in results for h in r.hints if isinstance(h, Claim)]
    if not claims:
        return
    refuted = refuted_mistakes(check, built, results) | refuted_by_ladder(check, ladder) \
        if any(c.mistakes for c in claims) else set()
    factor = common_factor(built, results) if any(c.factor is not None for c in claims) else None
    for case, result in zip(built, results):
        kept = []
        for hint in result.hints:
            if isinstance(hint, Claim) and hint.mistakes and refuted & set(hint.mistakes):
                left = [m for m in hint.mistakes if m not in refuted]
                hint = Claim(one_of(left), left) if left else None
            elif isinstance(hint, Claim) and hint.factor is not None and factor is None:
                hint = None
            if hint is not None:
                kept.append(hint)
        if len(kept) < len(result.hints) and not kept:
            result.lines += [where for name in sorted(result.wrong) if (where := first_difference(
                name, result.got.get(name), case.expected.get(name), case.dtype, quoting, case.sizes))]
        result.hints = kept


# --------------------------------------------------------------------------
# where the outputs go wrong, by experiment (issue 59; attention_checks.localise, answers.localising)


def rung(check: "Check", spec: Mapping[str, Any], outcome: Outcome) -> Rung | None:
    """What the student's code gave on one of the check's localising cases, beside the reference's,
    and whether it was right: every output the reference's, within the tolerance of the case's dtype
    (its dtype and device aside: the ladder localises wrong values); None where the case raised or
    gave another number of outputs (nothing to compare entry by entry)."""
    case = judged(check, spec, REFERENCES)
    if outcome.error is not None:
        return None
    got, problem = _unpack(outcome.value, list(case.expected), AS_IS, case.sizes)
    if problem is not None:
        return None
    right = all(close(got[name], case.expected[name], case.dtype, equal_nan=True) for name in case.expected)
    return Rung(got, case.expected, case.dtype, right)


def rung_right(check: "Check", spec: Mapping[str, Any], outcome: Outcome) -> bool:
    """Whether the student's code was right on one of the check's localising cases (``rung``)."""
    found = rung(check, spec, outcome)
    return found is not None and found.right


def localised(check: "Check", ladder: Ladder | None, quoting: Quoting = AS_IS) -> str | None:
    """What a failed check's ladder shows (answers.localising.finding), or None: no ladder, no
    axes, or no references here (the published data holds no answer to a localising case). The
    recorded calls' lines and functions are quoted as ``quoting`` allows (sealed: only the
    student's own, which the submitted cells hold)."""
    if ladder is None or check.axes is None or not ladder.outcomes or default_source(check) is not REFERENCES:
        return None
    def at(index: int) -> tuple[Judged, Callable[[], Any]]:
        case = judged(check, check.axes.cases()[index], REFERENCES)
        return case, lambda: answer_for(check).reference(case.x, case.spec)

    @functools.cache
    def sizes(index: int) -> frozenset[int]:  # a case's own numbers, once for all its calls
        return at(index)[0].sizes

    def quoted(call: Call, index: int) -> Call:
        return replace(call, code=quoting.line(call.code), within=quoting.function(call.within),
                       arguments=quoting.arguments(call.arguments, sizes(index)))

    ladder = replace(ladder, calls=[[quoted(call, index) for call in calls] for index, calls in enumerate(ladder.calls)],
                     failed=[call and quoted(call, index) for index, call in enumerate(ladder.failed)])

    with quiet():  # the reference on a case, its steps recorded (a module's of the same names, a function's calls)
        rungs = [rung(check, spec, outcome) for spec, outcome in zip(check.axes.cases(), ladder.outcomes)]
        return finding(check.axes, ladder, rungs, at)


def refuted_by_ladder(check: "Check", ladder: Ladder | None) -> set[str]:
    """The known mistakes (by hint) that the check's localising cases contradict: a mistake is kept
    only where one of its forms (the same hint) reproduces the student's outputs on every one the
    code gets wrong (where it determines them; entries that are not finite in both, a row with
    every key masked, are compared as refuted_mistakes compares them). A
    mistake that would have been right where the code is wrong is refuted (RoPE frequencies from
    index one are wrong at positions 0 and 1, where rotating by 0, 1, ..., L-1 whatever the
    positions is right), and so is one that gives other values than the code (scores divided by
    the square root of the batch look unscaled in a batch of one, not in a batch of three)."""
    if ladder is None or check.axes is None or default_source(check) is not REFERENCES:
        return set()
    refuted: set[str] = set()
    for spec, outcome in zip(check.axes.cases(), ladder.outcomes):
        # a case the code gets right says nothing of a mistake that only some cases show (attn_mask
        # ignored where no padding mask comes with it); one that raised, nothing of values
        if outcome.error is not None or rung_right(check, spec, outcome):
            continue
        case = judged(check, spec, REFERENCES)
        got, problem = _unpack(outcome.value, list(case.expected), AS_IS, case.sizes)
        gives, parts = set(), set()  # a mistake's forms count together: one that gives the code's values keeps it
        for mistake in REFERENCES.mistakes(check, case):
            outputs = {name: out for name, out in mistake.outputs.items() if out is not None}
            if mistake.fits is not None or not outputs:
                continue
            named = named_mistakes(mistake.hint)
            if not problem and all(close(got.get(name), out, case.dtype, equal_nan=True)
                                   for name, out in outputs.items()):
                gives.update(named)
            elif problem or any(_differ_where_finite(got.get(name), out, case.dtype) for name, out in outputs.items()):
                parts.update(named)
        refuted |= parts - gives
    reseeded = check.axes.reseeded()
    if reseeded is not None and drew_nothing(check, ladder, *reseeded):
        first = judged(check, check.axes.cases()[reseeded[0]], REFERENCES)
        refuted |= {part.hint for m in REFERENCES.mistakes(check, first) for part in m.members if part.draws}
    return refuted


def drew_nothing(check: "Check", ladder: Ladder, first: int, reseeded: int) -> bool:
    """Whether the code gave the same outputs on two localising cases that differ only in the seed of
    the random numbers it may draw (localise.Axes.reseeded): then it draws none, and a mistake that
    draws at random is not what it does."""
    if reseeded >= len(ladder.outcomes):
        return False
    cases = check.axes.cases()
    a, b = (rung(check, cases[i], ladder.outcomes[i]) for i in (first, reseeded))
    return a is not None and b is not None and all(
        isinstance(a.got[name], torch.Tensor) and close(a.got[name], b.got[name], a.dtype, equal_nan=True)
        for name in a.expected)


def decide_dependent_hints(check: "Check", built: Sequence[Judged], results: Sequence[CaseResult],
                           seen: Mapping[str, bool]) -> None:
    """A hint whose cause depends on the notebook's other tests (a mistake's ``Depends``) says the
    cause that the tests the grader saw decide: never both conditions where it knows which holds."""
    for case, result in zip(built, results):
        if result.fraction >= 1:
            continue
        decided = {part.hint: said for m in case.source.mistakes(check, case) for part in m.members
                   if part.depends is not None and (said := part.depends.said(seen)) is not None}
        if decided:
            result.hints = [_with_decided(hint, decided) for hint in result.hints]


def _with_decided(hint: Any, decided: Mapping[str, str]) -> Any:
    """A hint with each mistake it names whose cause the grader's tests decided replaced by that
    cause, also where it names several (merged twins, bugs alike at the case's tolerance)."""
    named = named_mistakes(hint) if isinstance(hint, str) else []
    if not any(part in decided for part in named):
        return hint
    text = one_of(decided.get(part, part) for part in named)
    return Claim(text, hint.mistakes, hint.factor) if isinstance(hint, Claim) else text


def add_finding(results: Sequence[CaseResult], found: str | None) -> None:
    """The finding, as a hint of every failing case that no verified diagnosis explains (a case whose
    hint names a known mistake, which survived verify_claims, keeps it alone)."""
    if not found:
        return
    for result in results:
        if result.fraction < 1 and not any(isinstance(h, Claim) and h.mistakes for h in result.hints):
            result.hints.append(found)


# --------------------------------------------------------------------------
# the report


@dataclass
class Report:
    score: float
    points: float
    text: str
    # the graded name, where its cases failed and no ladder of the kernel's localised them although
    # the grader could (the grader's second run asks the kernel for it: autograder.engine.runner)
    unlocalised: str = ""

    def deliver(self):
        """What nbgrader reads from a test cell (see the module docstring)."""
        __tracebackhide__ = True
        if self.score >= self.points:
            print(self.text)
            return None
        if self.score <= 0:
            raise CheckFailed(self.text) from None
        print(self.text)
        return PartialCredit(self.score, self.points)


def _forbidden_text(name: str, found: Sequence[str], points: float) -> str:
    """What a check says of forbidden uses: the mirrored function (or a way of hiding it) it calls,
    and what it uses outside the allowlist (attention_checks.allowlist: the first, where it is)."""
    def shown(use: str) -> str:
        line = getattr(use, "line", "")
        return f"{use} (`{line}`)" if line else str(use)

    calls = [shown(use) for use in found if not str(use).startswith(OUTSIDE)]
    outside = [use for use in found if str(use).startswith(OUTSIDE)]
    text = []
    if calls:
        text.append(f"✗ {name} calls {' and '.join(calls)}, which this exercise asks you to write yourself. "
                    f"Doing so earns no points for that function (0 / {points:g}).")
    if outside:
        first = outside[0]
        line = getattr(first, "line", "")
        more = f" (and {len(outside) - 1} more)" if len(outside) > 1 else ""
        text.append(f"✗ {name} uses {str(first)[len(OUTSIDE):]}{f' in `{line}`' if line else ''}{more}, which "
                    f"code in a graded notebook may not use (0 / {points:g} points): {ALLOWED_INSTEAD}.")
    return "\n".join(text)


def judge(check: "Check", cases: Sequence[Mapping[str, Any]], outcomes: Sequence[Outcome], *, points: float,
          forbidden: Sequence[str] = (), devices: Sequence[str] | None = None, shown: int = 3,
          most: int = 5, quoting: Quoting = AS_IS, source: Any = None,
          not_run: Mapping[str, str] | None = None, ladder: Ladder | None = None,
          seen: Mapping[str, bool] | None = None) -> Report:
    """The report on a check's outcomes; `devices`: where each case's inputs were (default: recorded);
    `quoting`: how it quotes the student's code (`Sealed` once a grading kernel has run hidden tests);
    `source`: where the answers come from (default_source); `not_run`: names that cells which do not
    compile define -> what to say of their cell; `ladder`: what the kernel's localising cases did
    (localise), which says where the outputs go wrong when the check fails (``localised``); `seen`:
    the notebook's graded names judged before this one -> whether every test of theirs passed (what
    a hint that depends on them says: ``Depends``)."""
    if forbidden:
        return Report(0.0, points, _forbidden_text(check.name, list(dict.fromkeys(forbidden)), points))
    try:
        built = [judged(check, case, source) for case in cases]
    except NotPublished as missing:
        return Report(0.0, points, f"✗ {check.name}: {missing} (0 / {points:g} points)")
    if devices is None:
        devices = [str(b.x.like.device) if b.x.like is not None else "cpu" for b in built]
    results = [judge_case(check, o, b, d, quoting, not_run) for o, b, d in zip(outcomes, built, devices)]
    verify_claims(check, built, results, quoting, ladder)
    if seen:
        decide_dependent_hints(check, built, results, seen)
    fraction = sum(r.fraction for r in results) / len(results)
    if fraction < 1:
        add_finding(results, localised(check, ladder, quoting))
    if fraction == 1:
        return Report(points, points, f"✓ {check.name}: all {len(results)} cases pass ({points:g} / {points:g} points)")

    # round to 2 decimals for a deterministic grade; never show full points for a failing check
    score = max(min(round(points * fraction, 2), round(points - 0.01, 2)), 0.0)
    failed = [(i, r) for i, r in enumerate(results) if r.fraction < 1]
    if all(r.not_implemented for r in results):
        return Report(0.0, points, f"✗ {check.name} is not implemented yet (0 / {points:g} points)")
    report = [f"✗ {check.name}: {len(failed)} of {len(results)} cases fail ({score:g} / {points:g} points)"]
    given: list[str] = []  # each hint once, where it first applies
    listed = 0
    # show the first `shown` failing cases, and later ones that bring a hint not yet given: `most` in all,
    # so that a report fits on a screen
    for n, (i, r) in enumerate(failed):
        fresh = [h for h in r.hints if h not in given]
        if listed == most or (n >= shown and not fresh):
            continue
        given += fresh
        listed += 1
        report.append(f"\ncase {i + 1}: {built[i].shown.replace(DEVICE, devices[i].split(':')[0])}")
        report += ["    " + line for line in r.lines]
        report += [f"    hint: {h}" for h in fresh]
        if r.hints and not fresh:
            report.append("    hint: as above")
    if len(failed) > listed:
        report.append(f"\n... and {len(failed) - listed} more failing case(s)")
    can_localise = ladder is None and check.axes is not None and default_source(check) is REFERENCES
    return Report(score, points, "\n".join(report), unlocalised=check.name if can_localise else "")


def not_run_text(name: str, said: str, points: float) -> str:
    """The report of a check whose graded object is defined by a cell that does not compile
    (`said`: "your cell `project_qkv` does not run: IndentationError at line 7")."""
    return (f"✗ {name}: {said} (0 / {points:g} points)\n"
            f"    hint: {said[0].upper()}{said[1:]}: Python stops at that line before it runs any of the cell, so "
            "nothing the cell defines exists; fix the line and run the cell (every test that needs it fails until "
            "then).")


def judge_records(check: "Check", record: Any, cases: Sequence[Mapping[str, Any]], *, points: float,
                  found: Sequence[str] = (), quoting: Quoting = AS_IS, missing: str | None = None,
                  not_run: Mapping[str, str] | None = None, seen: Mapping[str, bool] | None = None) -> Report:
    """The grader's side: a test cell's record from the kernel, and the forbidden uses the grader
    found in the student's source (`found`); the kernel's own observation can only add to them.
    `quoting`: how the report quotes what the kernel recorded. `missing`: what to say of the cell
    that defines the graded object when Python cannot compile it; `not_run`: every name such cells
    define -> the same (a case that raised NameError for one of them says so); `seen`: the notebook's
    graded names judged before -> whether every test of theirs passed (judge)."""
    if not isinstance(record, dict) or not isinstance(record.get("outcomes"), list) \
            or len(record["outcomes"]) != len(cases):
        if missing:
            return Report(0.0, points, not_run_text(check.name, missing, points))
        # what the grader knows: no record (whether the notebook stopped, or the test cell raised
        # before its check, the kernel's outputs cannot tell: they are the student's to forge)
        return Report(0.0, points, f"✗ {check.name}: no result was recorded for this test (0 / {points:g} points): "
                      "the notebook stopped, or this test cell raised, before its check ran.")
    decoded = [decode_outcome(data) for data in record["outcomes"]]
    outcomes = [o for o, _ in decoded]
    devices = [d or "cpu" for _, d in decoded]
    recorded = record.get("forbidden", [])
    names = set(check.forbidden_names)
    kernel_seen = [n for n in recorded if isinstance(n, str) and n in names] if isinstance(recorded, list) else []
    by_name = {str(f): f for f in found}
    uses = [by_name.get(n, n) for n in dict.fromkeys([*map(str, found), *kernel_seen])]
    uses.sort(key=lambda use: str(use) in ALWAYS_FORBIDDEN)  # the mirrored function first, the ways of hiding it after
    return judge(check, cases, outcomes, points=points, forbidden=uses, devices=devices, quoting=quoting,
                 not_run=not_run, ladder=decode_ladder(record.get("localising"), check), seen=seen)
