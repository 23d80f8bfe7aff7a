"""Localising a mistake by experiment: the kernel's side (issue 59, items 1 and 2).

Design
------
A catalogue of anticipated mistakes names only the mistakes someone listed, and its symptoms are
shared by mistakes nobody listed. An experiment needs no catalogue: run the student's code on a
ladder of small cases that differ from one another in one thing, and the first rung where it goes
wrong says where the mistake lies ("right with one block of keys; wrong with two: look at the step
that combines blocks").

* **Axes, declared with the check** (``Check.axes``, an ``Axes``): a *base* case, the smallest of
  the check (one block, one head, no mask, float64 so that no error hides under float32's
  tolerance), and *axes*, each a ladder of ``Step``s away from the base along one thing that
  varies (the length against the block size, the heads, the causal mask, L != S, the number of
  cache updates, which of temperature/top-k/top-p is on, the beam's width). A step is the base
  with a few case keys changed (never two things at once), with the words a finding says of it.
  The cases are fixed data: the same notebook gets the same cases, outcomes and hint on every run
  and machine (each case's inputs come from its own seed, ``core.case_seed``, on the CPU).
* **Run in the kernel, judged outside it.** Like the declared cases, the localising cases run
  where student code runs, and only their outcomes leave (``record``: the record's "localising"
  entry); which ones were right, and the finding, are decided by the grader from the references it
  computes itself (``answers.localising``), for a name that failed only. The ladder runs on the
  CPU, after the declared cases (nothing it does changes a declared outcome), without the
  meta-device run or the watch of forbidden calls, at most ``MOST_CASES`` tiny cases and none past
  ``TIME_LIMIT_S``; the global random state is put back after it, and a student whose declared runs
  kept tensors between calls (a class attribute, a global) runs none (its runs would change what
  later cells see). Points come from the declared cases alone: a ladder never changes a score.
* **Only for a name that failed.** A grading kernel holds no answer, so the only failure it can see
  is a declared case that raised: then it runs the name's ladder (once per graded object). For
  wrong values, the grader asks: ``ATTENTION_CHECKS_LOCALISE`` in the kernel's environment ("all",
  or graded names) runs those ladders, set by the grader's second run of a notebook whose failed
  names have none (``autograder.engine.runner``; measured: running every ladder always costs 10 to
  35% of a notebook's check time, past the 10% the grading throughput may lose). A correct
  function costs nothing more anywhere.
* **Steps inside a module** (item 2): a module's check may name its submodules (``Axes.steps``:
  self_attn, linear1, ... of an encoder layer; a stack's layers.0; the projections w_q, w_k, w_v
  and w_o); the base case records each one's first call with forward hooks (``StepRecorder``: its
  floating-point inputs by parameter name, and its output), and the grader names the first, in
  the reference's order, whose output differs from the reference's own (recorded the same way
  where the reference is a PyTorch module of the same names; else, for a chain of projections,
  the merged heads are solved from the reference's output through w_o).
* **Calls inside a function** (item 2): every localising case records the PyTorch calls the code
  makes (``CallRecorder``, a ``TorchFunctionMode``: each result, the line of the student's code that
  made it, the earlier results it took, its arguments as plain data; and the call that raised, where
  one ended the case), and the grader names the first result on the way to the output that the
  reference's computation never holds and from which nothing right is made
  (``answers.localising.first_call_that_differs``), with one change to that call, run again by the
  grader, that makes the reference's values where one does (``answers.localising.mended``).
* **Every finding is an observation.** What the grader says is only what the ladder showed: the
  rung where the outputs went wrong and the one below it where they were right, and the part of
  the computation that the axis exercises. It stands where no catalogued diagnosis survived its
  own check (``answers.judging.verify_claims``): never in place of a verified one, never a guess.
"""
from __future__ import annotations

import contextlib
import inspect
import linecache
import os
import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

import torch

from .core import RESEED, describe_error, quiet
from .record import Outcome, _decode, _encode, _encode_outcome, decode_outcome

if TYPE_CHECKING:
    from .registry import Check

MOST_CASES = 16  # the ladder's cases of one name, the base included
TIME_LIMIT_S = 10.0  # a name's ladder stops here: a bound for code that is slow even on tiny inputs (a loaded
# machine takes a few seconds for the largest ladders, 08's Transformer: a finding must not depend on the load)
# what a rung of one token (or position) leaves out, for the axes that go down to it
MORE_THAN_ONE_TOKEN = "what more than one token brings: the scores between different tokens, their scale and the softmax"


@dataclass(frozen=True)
class Step:
    """One rung: the case keys it changes from the base, and what a finding calls it."""

    changes: Mapping[str, Any]
    said: str  # "two blocks of keys": "right with <the rung below>; wrong with <this>"


@dataclass(frozen=True)
class Axis:
    """A ladder away from the base along one thing that varies, simplest first."""

    said: str  # what the base is along this axis: "one block of keys"
    steps: tuple[Step, ...]
    where: str  # the part of the computation the axis exercises: "the step that combines blocks of keys"
    # the rungs are simpler than the base (position 0 alone, where no rotation shows): then `where` is
    # what the base exercises that they do not
    downward: bool = False


@dataclass(frozen=True)
class Axes:
    """A check's base case and the axes its inputs vary along."""

    base: Mapping[str, Any]
    axes: tuple[Axis, ...]
    # a module's submodules whose inputs and outputs the base case records (item 2), in the order of
    # the computation: name in the module -> what a finding calls its output (and, with "in:", its input)
    steps: tuple[tuple[str, str], ...] = ()

    def cases(self) -> list[dict[str, Any]]:
        """The ladder's cases, the base first, then each axis's rungs in order (bounded)."""
        found = [dict(self.base)] + [{**self.base, **step.changes} for axis in self.axes for step in axis.steps]
        if len(found) > MOST_CASES:
            raise ValueError(f"{len(found)} localising cases; at most {MOST_CASES}")
        return found

    def reseeded(self) -> tuple[int, int] | None:
        """Two cases that differ only in the seed of the random numbers the code may draw (RESEED):
        their indices among ``cases()``, the first case's first; None where no rung reseeds."""
        found = self.cases()
        for index, case in enumerate(found):
            if case.get(RESEED):
                twin = {key: value for key, value in case.items() if key != RESEED}
                first = next((i for i, other in enumerate(found) if other == twin), None)
                if first is not None:
                    return first, index
        return None

    def numbered(self, axis: Axis) -> Iterator[tuple[int, Step]]:
        """An axis's rungs with their index among ``cases()``."""
        index = 1 + sum(len(a.steps) for a in self.axes[:self.axes.index(axis)])
        for offset, step in enumerate(axis.steps):
            yield index + offset, step


def ladder(base: Mapping[str, Any], *axes: Axis, steps: Sequence[tuple[str, str]] = ()) -> Axes:
    """An Axes, checked for size when declared (a check module that declares too many fails to load)."""
    declared = Axes(dict(base), tuple(axes), tuple(steps))
    declared.cases()
    return declared


def axis(said: str, where: str, *steps: tuple[Mapping[str, Any], str], downward: bool = False) -> Axis:
    """axis("one block of keys", "the step that combines blocks", (dict(S=8), "two blocks of keys"), ...)"""
    return Axis(said, tuple(Step(dict(changes), words) for changes, words in steps), where, downward)


# --------------------------------------------------------------------------
# running the ladder (in the kernel)


@contextlib.contextmanager
def _random_state_kept() -> Iterator[None]:
    """The global random generators as they were before: the notebook's later cells draw the same."""
    torch_state, python_state = torch.random.get_rng_state(), random.getstate()
    try:
        yield
    finally:
        torch.random.set_rng_state(torch_state)
        random.setstate(python_state)


@dataclass
class Seen:
    """One submodule's first call: its floating-point inputs by parameter name (query, key and value
    of an attention; masks are left out, whose form a module may change: bool or additive), and its
    output (an attention's output without its weights)."""

    given: dict[str, torch.Tensor]
    made: torch.Tensor

    def first(self) -> torch.Tensor | None:
        return next(iter(self.given.values()), None)


class StepRecorder:
    """The inputs and output of a module's named submodules during one call: forward hooks on the
    first module the call runs (the student's), each submodule's first call kept."""

    def __init__(self, names: Sequence[str]):
        self.names, self.seen, self.handles = list(names), {}, []

    def __enter__(self) -> "StepRecorder":
        if self.names:
            self.handles.append(torch.nn.modules.module.register_module_forward_pre_hook(self._first_module))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self.handles:
            handle.remove()

    def _first_module(self, module: torch.nn.Module, args: Any) -> None:
        self.handles.pop(0).remove()  # only the outermost module: the one the check built
        for name in self.names:
            try:
                sub = module.get_submodule(name)
            except AttributeError:
                continue  # the student named it otherwise: that step is not observed
            self.handles.append(sub.register_forward_hook(self._keeper(name), with_kwargs=True))

    def _keeper(self, name: str) -> Callable:
        def keep(module: torch.nn.Module, args: Any, kwargs: Any, output: Any) -> None:
            output = output[0] if isinstance(output, (tuple, list)) and output else output  # attention: (output, weights)
            if name in self.seen or not isinstance(output, torch.Tensor):
                return
            given = {key: value.detach().clone() for key, value in _by_parameter(module, args, kwargs).items()
                     if isinstance(value, torch.Tensor) and value.is_floating_point()}
            if given:
                self.seen[name] = Seen(given, output.detach().clone())
        return keep


def _by_parameter(module: torch.nn.Module, args: Any, kwargs: Any) -> dict[str, Any]:
    """A call's arguments by the forward's parameter names, however they were passed
    (self_attn(x, x, x) and self_attn(query=x, key=x, value=x) alike); by position where the
    signature cannot be read (the forward may be student code)."""
    try:
        signature = inspect.signature(module.forward)
        found: dict[str, Any] = {}
        for name, value in signature.bind_partial(*args, **kwargs).arguments.items():
            kind = signature.parameters[name].kind
            if kind is inspect.Parameter.VAR_POSITIONAL:  # forward(self, *inputs)
                found.update({f"{name}[{i}]": item for i, item in enumerate(value)})
            elif kind is inspect.Parameter.VAR_KEYWORD:
                found.update(value)
            else:
                found[name] = value
        return found
    except Exception:  # noqa: BLE001 - student code, or a call that does not fit its own signature
        return {**{f"argument {i}": value for i, value in enumerate(args)}, **kwargs}


@dataclass
class Call:
    """One PyTorch call that the code made in a localising case: the tensor it made, the line of the
    code that made it (its number in its cell and its text; 0 and "" where no line of the student's
    is on the stack), and which earlier calls' results it took (their indices)."""

    made: torch.Tensor
    what: str = ""  # the function or method ("matmul", "softmax", "__getitem__")
    line: int = 0  # in its cell
    code: str = ""
    takes: tuple[int, ...] = ()
    within: str = ""  # the student's function or method whose line it is ("softmax", "forward")
    # its arguments as data ({"args": [...], "kwargs": {...}}, ``_argument``; "item": which of the tensors it
    # made this one is, for a call that made several), for the grader to run the call again changed in one
    # thing; None where one of them is not plain data
    arguments: Any = None


_NOT_STUDENT = tuple(os.path.dirname(module.__file__) + os.sep for module in (torch, contextlib))
_CHECKS = os.path.dirname(os.path.abspath(__file__)) + os.sep


class CallRecorder(torch.overrides.TorchFunctionMode):
    """Every PyTorch function and tensor method that the code calls during one run, with the tensor
    each one makes, in order (a ``TorchFunctionMode``: the calls PyTorch makes inside them are not
    seen, only the code's own). ``lines``: also the line of code under study that made each one (the
    innermost frame outside PyTorch and Python's own modules), and only the calls that code makes.
    At most MOST_CALLS are kept, holding MOST_ELEMENTS entries in all; past them nothing more is (a
    call after an unkept one could not say what it took)."""

    MOST_CALLS = 200
    MOST_ELEMENTS = 4096  # a localising case's tensors have tens of entries: a case's record stays small
    MOST_CODE = 160  # characters of a line

    def __init__(self, lines: bool = True, most_calls: int = MOST_CALLS, most_elements: int = MOST_ELEMENTS):
        super().__init__()
        self.lines, self.calls, self.elements, self.full = lines, [], 0, False
        self.most_calls, self.most_elements = most_calls, most_elements
        self.given: list[torch.Tensor] = []  # tensors the calls took that no kept call made (inputs, parameters)
        self.failed: Call | None = None  # the last call that raised, with its arguments (made: no entries)
        self._index: dict[int, int] = {}  # id(tensor) -> the last call that made it
        self._given_index: dict[int, int] = {}  # id(tensor) -> its place in self.given
        self._given_elements = 0
        self._kept: list[torch.Tensor] = []  # the tensors themselves: their ids stay theirs while recording
        # ids of tensors that calls not the code's own made once the code had begun (a given model's output);
        # a given tensor among them is marked "unseen": what it holds may depend on the code's earlier steps
        self._out_of_sight: set[int] = set()
        self._unseen: set[int] = set()  # their places in self.given

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            made = func(*args, **kwargs)
        except Exception:
            if not self.full:
                with contextlib.suppress(Exception):  # recording never changes what the code does
                    self._keep_failed(func, args, kwargs)
            raise
        if not self.full:
            try:
                self._keep(func, made, args, kwargs)
            except Exception:  # noqa: BLE001 - a tensor subclass of the student's: the call is not kept
                pass  # (recording never changes what the code computes)
        return made

    def _keep(self, func: Any, made: Any, args: Any, kwargs: Any) -> None:
        tensors = [t for t in (made if isinstance(made, (tuple, list)) else [made])
                   if isinstance(t, torch.Tensor) and t.device.type == "cpu" and 0 < t.numel() and not t.is_complex()]
        if not tensors:
            return
        if len(self.calls) + len(tensors) > self.most_calls \
                or self.elements + sum(t.numel() for t in tensors) > self.most_elements:
            self.full = True
            return
        takes = self._takes(args, kwargs)
        where = self._line() if self.lines else (0, "", "")
        if where is None:
            if self.calls:
                self._out_of_sight.update(id(t) for t in tensors)
            return
        line, code, within = where
        self.failed = None  # the code went on after a call that raised: that one did not end the case
        several = isinstance(made, (tuple, list))  # chunk, unbind, max along a dim: which item each one is
        arguments = self._arguments(args, kwargs) if not several or len(tensors) == len(made) else None
        for item, tensor in enumerate(tensors):
            self.elements += tensor.numel()
            self._index[id(tensor)] = len(self.calls)
            self._kept.append(tensor)
            kept = {**arguments, "item": item} if arguments is not None and several else arguments
            self.calls.append(Call(tensor.detach().clone(), _name(func), line, code, takes, within, kept))

    def _keep_failed(self, func: Any, args: Any, kwargs: Any) -> None:
        where = self._line() if self.lines else (0, "", "")
        if where is not None:
            self.failed = Call(torch.zeros(0), _name(func), *where[:2], self._takes(args, kwargs), where[2],
                               self._arguments(args, kwargs))

    def _takes(self, args: Any, kwargs: Any) -> tuple[int, ...]:
        """The kept calls whose results a call takes."""
        return tuple(sorted({self._index[id(a)] for a in _tensors_in((args, kwargs)) if id(a) in self._index}))

    def _arguments(self, args: Any, kwargs: Any) -> dict | None:
        """A call's arguments as data, a tensor as the kept call that made it or as a given one (kept
        once, within MOST_ELEMENTS of its own); None where one is not plain data or past that bound."""
        try:
            return {"args": [self._argument(a, 0) for a in args],
                    "kwargs": {str(k): self._argument(v, 0) for k, v in kwargs.items()}}
        except _NotPlain:
            return None

    def _argument(self, value: Any, depth: int) -> Any:
        if isinstance(value, torch.Tensor):
            if id(value) in self._index:
                return {"call": self._index[id(value)]}
            if id(value) not in self._given_index:
                if value.device.type != "cpu" or value.is_complex() \
                        or self._given_elements + value.numel() > self.most_elements:
                    raise _NotPlain
                self._given_elements += value.numel()
                self._given_index[id(value)] = len(self.given)
                if id(value) in self._out_of_sight:
                    self._unseen.add(len(self.given))
                self._kept.append(value)
                self.given.append(value.detach().clone())
            index = self._given_index[id(value)]
            return {"given": index, "unseen": True} if index in self._unseen else {"given": index}
        if value is None or isinstance(value, (bool, int)) or (isinstance(value, str) and len(value) <= 20):
            return {"plain": value}
        if isinstance(value, float):
            return {"float": repr(value)}
        if value is Ellipsis:
            return {"ellipsis": True}
        if isinstance(value, torch.dtype):
            return {"dtype": str(value).removeprefix("torch.")}
        if isinstance(value, torch.device):
            return {"plain": str(value)[:20]}
        if isinstance(value, slice):
            return {"slice": [self._argument(part, depth) for part in (value.start, value.stop, value.step)]}
        if isinstance(value, (tuple, list)) and len(value) <= MOST_ITEMS and depth < 3:
            return {"sequence": [self._argument(item, depth + 1) for item in value],
                    "kind": "tuple" if isinstance(value, tuple) else "list"}
        raise _NotPlain

    def _line(self) -> tuple[int, str, str] | None:
        """The line of the code under study that made the call (its number, its text, its function),
        or None where the call is not one of its steps: made by these checks themselves (building a
        case, moving a module), or by a constructor (a module's parameters are given, like its inputs)."""
        frame = inspect.currentframe()
        while frame is not None and (frame.f_code in _RECORDING or frame.f_code.co_filename.startswith(_NOT_STUDENT)):
            frame = frame.f_back
        if frame is None:
            return 0, "", ""
        if os.path.abspath(frame.f_code.co_filename).startswith(_CHECKS):
            return None
        caller = frame
        while caller is not None and not os.path.abspath(caller.f_code.co_filename).startswith(_CHECKS):
            if caller.f_code.co_name == "__init__":
                return None  # a constructor's, or a helper's it calls (a lambda that makes each attention)
            caller = caller.f_back
        code = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
        return frame.f_lineno, code[:self.MOST_CODE], _name(frame.f_code)


_RECORDING = {CallRecorder.__torch_function__.__code__, CallRecorder._keep.__code__, CallRecorder._keep_failed.__code__,
              CallRecorder._line.__code__}
MOST_ITEMS = 8  # a sequence among a call's arguments that is kept as data (the tensors to torch.cat, a shape)


class _NotPlain(Exception):
    """An argument that is not kept as data (an object of the code's own, a long list)."""


def _name(func: Any) -> str:
    """A function's or code object's name, as a message may quote it (``_quotable``): a method by
    its class ("LayerNorm.forward"), a nested function by its own name."""
    name = str(getattr(func, "__name__", None) or getattr(func, "co_qualname", None) or getattr(func, "co_name", ""))
    return _quotable(name.split(".<locals>.")[-1])


def _quotable(name: str) -> str:
    """``name`` where it is identifiers joined by dots, else "": a record's names are shown to people."""
    return name if len(name) <= 60 and all(part.isidentifier() for part in name.split(".")) else ""


def _tensors_in(value: Any) -> Iterator[torch.Tensor]:
    """The tensors in a call's arguments (a list of tensors to torch.cat, a dict of keywords)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors_in(item)


@dataclass
class Ladder:
    """What the localising cases did: one outcome per case that ran, and the code's PyTorch calls in
    each (``Call``); in the base case, the named submodules' inputs and output (a module's check)."""

    outcomes: list[Outcome] = field(default_factory=list)
    steps: dict[str, Seen] = field(default_factory=dict)
    calls: list[list[Call]] = field(default_factory=list)  # one list per outcome
    given: list[list[torch.Tensor]] = field(default_factory=list)  # per outcome: the tensors its calls took as given
    failed: list[Call | None] = field(default_factory=list)  # per outcome: the call that raised, if one did


def run_ladder(check: "Check", student: Any) -> Ladder:
    """The check's localising cases (none without declared axes), on the CPU; past the time limit,
    only the ones that ran."""
    ran = Ladder()
    if check.axes is None or not callable(student):
        return ran
    started = time.monotonic()
    with _random_state_kept():
        for index, spec in enumerate(check.axes.cases()):
            if time.monotonic() - started > TIME_LIMIT_S:
                break
            recorder = StepRecorder([name for name, _ in check.axes.steps] if index == 0 else [])
            # a module that names its steps is compared step by step, and every code call by call
            calls = CallRecorder()
            try:
                inputs = check.build(spec)
                with quiet(), recorder, calls:
                    ran.outcomes.append(Outcome(check.call(student, inputs, check.spec(spec))))
            except Exception as error:  # noqa: BLE001 - student code
                ran.outcomes.append(Outcome(error=describe_error(error)))
            ran.calls.append(calls.calls)
            ran.given.append(calls.given)
            ran.failed.append(calls.failed if ran.outcomes[-1].error is not None else None)
            if index == 0:
                ran.steps = recorder.seen
    return ran


# --------------------------------------------------------------------------
# as data in the record (``record``'s encoding: tensors keep dtype and shape)


def encode_ladder(ran: Ladder) -> dict:
    return {"outcomes": [_encode_outcome(o, None) for o in ran.outcomes],
            "steps": {str(name): {"given": {str(k): _encode(t, None) for k, t in seen.given.items()},
                                  "made": _encode(seen.made, None)} for name, seen in ran.steps.items()},
            "calls": [[_encode_call(call) for call in calls] for calls in ran.calls],
            "given": [[_encode(t, None) for t in given] for given in ran.given],
            "failed": [None if call is None else _encode_call(call) for call in ran.failed]}


def _encode_call(call: Call) -> dict:
    return {"made": _encode(call.made, None), "what": call.what, "line": call.line, "code": call.code,
            "takes": list(call.takes), "within": call.within, "arguments": call.arguments}


def _decode_call(item: Any, earlier: int) -> Call:
    """One recorded call, checked for form (its arguments are checked where they are used:
    ``answers.localising``); ValueError where it is malformed or takes what no earlier call made."""
    made, line, code = _decode(item["made"]), int(item["line"]), str(item["code"])[:CallRecorder.MOST_CODE]
    what, takes, within = str(item["what"]), tuple(int(i) for i in item["takes"]), str(item["within"])
    arguments = item.get("arguments")
    if not isinstance(made, torch.Tensor) or not all(0 <= i < earlier for i in takes) \
            or not isinstance(arguments, (dict, type(None))):
        raise ValueError("not a call")
    return Call(made, _quotable(what), line, code, takes, _quotable(within), arguments)


def _decode_calls(data: Any) -> list[Call]:
    """One case's recorded calls, as far as they are well formed: each a tensor, a line number, the
    line's text (cut to CallRecorder.MOST_CODE) and the indices of earlier calls only, within the
    recorder's bounds."""
    calls: list[Call] = []
    elements = 0
    for item in data[:CallRecorder.MOST_CALLS] if isinstance(data, list) else ():
        try:
            call = _decode_call(item, len(calls))
        except Exception:  # noqa: BLE001 - malformed: the calls after it are not read
            break
        elements += call.made.numel()
        if elements > CallRecorder.MOST_ELEMENTS:
            break
        calls.append(call)
    return calls


def _decode_given(data: Any) -> list[torch.Tensor]:
    """One case's given tensors, as far as they are tensors within the recorder's bound."""
    given: list[torch.Tensor] = []
    elements = 0
    for item in data if isinstance(data, list) else ():
        try:
            tensor = _decode(item)
        except Exception:  # noqa: BLE001 - malformed: the ones after it are not read
            break
        if not isinstance(tensor, torch.Tensor):
            break
        elements += tensor.numel()
        if elements > CallRecorder.MOST_ELEMENTS:
            break
        given.append(tensor)
    return given


def _decode_failed(item: Any, calls: Sequence[Call]) -> Call | None:
    try:
        return None if item is None else _decode_call(item, len(calls))
    except Exception:  # noqa: BLE001 - malformed: no call raised, as far as the grader knows
        return None


def decode_ladder(data: Any, check: "Check") -> Ladder | None:
    """A record's ladder, or None where it is missing or malformed (then nothing is localised):
    no more outcomes than the check has localising cases, steps only of the names it declares."""
    if check.axes is None or not isinstance(data, dict) or not isinstance(data.get("outcomes"), list) \
            or len(data["outcomes"]) > len(check.axes.cases()):
        return None
    outcomes = [decode_outcome(item)[0] for item in data["outcomes"]]
    steps: dict[str, Seen] = {}
    declared = {name for name, _ in check.axes.steps}
    for name, seen in (data.get("steps") or {}).items() if isinstance(data.get("steps"), dict) else ():
        try:
            given, made = {str(k): _decode(t) for k, t in seen["given"].items()}, _decode(seen["made"])
        except Exception:  # noqa: BLE001 - malformed: that step is not observed
            continue
        if name in declared and given and all(isinstance(t, torch.Tensor) for t in (made, *given.values())):
            steps[name] = Seen(given, made)
    def per_case(key: str) -> list:
        found = data.get(key) if isinstance(data.get(key), list) else []
        return found[:len(outcomes)] + [None] * (len(outcomes) - len(found))

    calls = [_decode_calls(trace) for trace in per_case("calls")]
    failed = [_decode_failed(item, trace) for item, trace in zip(per_case("failed"), calls)]
    return Ladder(outcomes, steps, calls, [_decode_given(item) for item in per_case("given")], failed)


# --------------------------------------------------------------------------
# under the autograder: which names run their ladder, once per student object


LOCALISE_VARIABLE = "ATTENTION_CHECKS_LOCALISE"  # in a grading kernel: "all", or graded names, comma-separated
_RECORDED: dict[str, tuple[Any, dict]] = {}  # graded name -> (the student's object, its ladder as data)


def asked_for(name: str) -> bool:
    """Whether the grader asked this kernel for the ladder of ``name`` (LOCALISE_VARIABLE)."""
    asked = {item.strip() for item in os.environ.get(LOCALISE_VARIABLE, "").split(",")}
    return "all" in asked or name in asked


def recorded_ladder(check: "Check", student: Any, outcomes: Sequence[Outcome], kept_state: bool) -> dict | None:
    """The ladder a grading kernel adds to a test cell's record, as data, or None.

    The kernel holds no answer, so the one failure it sees is a declared case that raised (a
    stub's NotImplementedError aside): only then, or where the grader asked for the name
    (``asked_for``), does the ladder run, once for each graded name and student object (a name's
    later test cells get the same record). A name whose declared cases all returned costs nothing
    more. None without axes, or where the declared runs left tensors in state every call sees
    (``kept_state``: a class attribute, a global): the ladder's runs would change what the
    notebook's later cells get."""
    if check.axes is None or kept_state or not callable(student):
        return None
    done = _RECORDED.get(check.name)
    if done is not None and done[0] is student:
        return done[1]
    if not asked_for(check.name) and not any(o.error is not None and not o.not_implemented for o in outcomes):
        return None
    _RECORDED[check.name] = (student, encode_ladder(run_ladder(check, student)))
    return _RECORDED[check.name][1]
