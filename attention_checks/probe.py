"""The kernel's side of a check: run the student's code on a case's inputs, and nothing else.

``probe_all`` builds each case's inputs (never a reference), moves them to the device, calls
the student's object under ``ForbiddenCalls`` and notes what it returned or raised and which
inputs it changed in place. Under the autograder, ``publish`` displays those outcomes as the
test cell's record; the grader judges them (``answers.judging``).

Without a GPU, a device bug (a mask made with ``torch.ones(L, L)``, no ``device=``, mixed with
inputs that a GPU grader puts on cuda) would pass: ``on_meta`` runs each case that passed once
more with every tensor on PyTorch's ``meta`` device, whose kernels check devices as CUDA's do (a
CPU tensor with dimensions may not meet a meta one; a 0-dim CPU scalar may) but hold no data.
Reading a value (``.item()``, ``torch.equal``) gets a made-up one, so the run goes on past
data-dependent steps. Only what it raised is recorded; the grader decides whether that is a
device bug (any other failure, such as boolean indexing on a meta tensor, means nothing).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from .core import ForbiddenCalls, describe_error, is_stub, quiet
from .record import Outcome, publish as publish_record

if TYPE_CHECKING:
    from .cases import Inputs
    from .registry import Check


@dataclass
class Probed:
    outcomes: list[Outcome]
    likes: list[torch.Tensor | None]  # each case's `like` input, on the device the code ran on
    forbidden: list[str]  # forbidden calls seen while the student's code ran


def _snapshot(inputs: "Inputs") -> dict[str, torch.Tensor]:
    return {name: value.clone() for name, value in inputs.named.items() if isinstance(value, torch.Tensor)}


def _changed(inputs: "Inputs", before: Mapping[str, torch.Tensor]) -> tuple[str, ...]:
    def same(now: torch.Tensor, copy: torch.Tensor) -> bool:  # NaN where there was NaN is unchanged
        return now.shape == copy.shape and now.dtype == copy.dtype and bool(
            ((now == copy) | (now.isnan() & copy.isnan()) if now.is_floating_point() else now == copy).all())

    return tuple(name for name, copy in before.items() if not same(inputs.named[name], copy))


def _meets_meta(outcome: Outcome) -> bool:
    """Whether a real run (inputs on the CPU or a GPU) met a meta tensor: raised naming the meta
    device, or returned one. Only code that keeps tensors from an earlier call (a class attribute,
    a global, a mutable default) can, since every meta run comes after the real runs of its cell."""
    if outcome.error is not None:
        return "device meta" in outcome.error or "meta and" in outcome.error or "found input tensor at meta" \
            in outcome.error
    return any(isinstance(item, torch.Tensor) and item.device == META for item in pytree.tree_leaves(outcome.value))


def probe(check: "Check", student: Any, inputs: "Inputs", spec: dict, guard: ForbiddenCalls) -> Outcome:
    """One call of the student's code; any failure is this case's."""
    before, seen = _snapshot(inputs), list(guard.seen)
    try:
        with quiet(), guard:
            value = check.call(student, inputs, spec)
    except Exception as error:  # noqa: BLE001 - student code
        outcome = Outcome(error=describe_error(error), not_implemented=is_stub(error),
                          modified=_changed(inputs, before))
    else:
        outcome = Outcome(value, modified=_changed(inputs, before))
    if _meets_meta(outcome):
        # PyTorch's meta kernels (its private implementations, in Python) ran on the kept meta
        # tensor: no call of the student's, and the case fails anyway (an error, or values on meta)
        guard.seen[:] = seen
    return outcome


META = torch.device("meta")


# Operators that take tensors of two devices on CUDA too: copies between devices, and indexing
# with CPU index tensors.
_CROSS_DEVICE = {torch.ops.aten.copy_.default, torch.ops.aten._to_copy.default, torch.ops.aten.index.Tensor,
                 torch.ops.aten.index_put_.default, torch.ops.aten.index_put.default,
                 torch.ops.aten._index_put_impl_.default, torch.ops.aten.lift_fresh.default}


def mixing_error(where: str, found: str) -> str:
    """The error a GPU raises where a tensor on ``found`` meets the inputs (on meta here)."""
    return f"Expected all tensors to be on the same device, but found at least two devices, meta and {found}! ({where})"


# Tags of the operators whose outputs stand-ins cannot give: those that draw random numbers (they
# would move the CPU's generator, which the student's later cells read) and those whose output's
# shape depends on the data (on meta they stop the run, and must go on doing so).
_NOT_ON_STAND_INS = (torch.Tag.nondeterministic_seeded, torch.Tag.dynamic_output_shape,
                     torch.Tag.data_dependent_output)
_stand_in_ops: dict[Any, bool] = {}
_LARGEST_STAND_IN = 1 << 24  # elements: test cases are far smaller; a larger tensor is left to the meta kernel


def _runs_on_stand_ins(func) -> bool:
    """Whether an operator's outputs are new tensors that only its inputs' shapes, strides and dtypes
    decide (no view, nothing written in place, no device argument, no randomness)."""
    if func not in _stand_in_ops:
        schema = func._schema
        _stand_in_ops[func] = (
            not schema.is_mutable and not any(tag in func.tags for tag in _NOT_ON_STAND_INS)
            and all(r.alias_info is None and str(r.type) in ("Tensor", "Tensor[]") for r in schema.returns)
            and not any(a.name == "device" for a in schema.arguments))
    return _stand_in_ops[func]


def _tensors_of(arguments: Sequence[Any]) -> list[torch.Tensor]:
    """An operator's tensor arguments: an aten schema nests lists one level deep at most (``cat``,
    ``index``), so this is all of them, without the cost of a pytree walk at every operator."""
    found = []
    for value in arguments:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(item for item in value if isinstance(item, torch.Tensor))
    return found


def _stand_in(value: Any) -> Any:
    """Zeros on the CPU with a meta tensor's shape, strides and dtype (in lists too: ``cat``)."""
    if isinstance(value, torch.Tensor):
        if value.device != META:
            return value
        shape, strides, offset = value.shape, value.stride(), value.storage_offset()
        extent = offset + 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if value.numel() else 0
        if extent > _LARGEST_STAND_IN:
            raise MemoryError("left to the meta kernel")
        return torch.zeros(extent, dtype=value.dtype).as_strided(shape, strides, offset)
    if isinstance(value, (list, tuple)):
        return type(value)(_stand_in(v) for v in value)
    return value


def _as_meta(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device=META)
    if isinstance(value, (list, tuple)):
        return type(value)(_as_meta(v) for v in value)
    return value


def _on_stand_ins(func, args: tuple, kwargs: dict) -> Any:
    """A functional operator's outputs on meta, shaped by its CPU kernel run on zeros.

    Many of PyTorch's meta kernels are written in Python (layer norm, addmm, softmax, the
    arithmetic operators once ``torch._dynamo`` is loaded) and take 0.3 to 3 ms a call, where the
    CPU kernel on test-sized zeros takes microseconds. Only shapes, strides and dtypes leave this
    function, never a value, so what the meta run can tell (which devices meet) is unchanged."""
    return _as_meta(func(*_stand_in(args), **{name: _stand_in(value) for name, value in kwargs.items()}))


class _OnMeta(TorchDispatchMode):
    """The rules of a GPU on the meta device, for every operator.

    Lets code that reads a value from a meta tensor go on: ``.item()``, ``bool(t)`` and
    ``torch.equal`` answer 0 or False instead of raising. nn.TransformerEncoder itself asks
    ``torch.equal(mask, causal)``, so without this every case with a mask would stop there,
    before the student's layers, and their device bugs would go unseen. A made-up value can
    only pick a branch; what the meta run reports is still a real device-mixing error.

    And checks the devices of every operator's tensors itself: a CPU tensor with dimensions
    meeting a meta one is an error, as it is on CUDA. Most meta kernels check that, but not all
    (``@``, ``bmm``, ``baddbmm``, ``einsum`` take a CPU operand on meta).

    And, once the devices are checked, shapes a functional operator's outputs by its CPU kernel on
    stand-ins (``_on_stand_ins``) rather than by its meta kernel, many of which are slow Python."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # PyTorch wraps a mode's __torch_dispatch__ to keep torch.compile out of it, importing
        # torch._dynamo (a second) at the first operator; nothing compiles here
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default:
            tensor = args[0]
            return False if tensor.dtype == torch.bool else 0.0 if tensor.is_floating_point() else 0
        if func is torch.ops.aten.equal.default:
            return False
        if func is torch.ops.aten.copy_.default and args[0].device != META and args[0].dim() > 0 \
                and isinstance(args[1], torch.Tensor) and args[1].device == META:
            # results written into a tensor made on the CPU: on a GPU they would stay there
            raise RuntimeError(mixing_error("when copying into a tensor", str(args[0].device)))
        if func.overloadpacket is torch.ops.aten.arange and (kwargs or {}).get("device") == META:
            made = _arange_on_the_cpu(func, args, kwargs)
            if made is not None:
                return made
        if func not in _CROSS_DEVICE:
            tensors = _tensors_of((*args, *(kwargs or {}).values()))
            stray = next((t for t in tensors if t.device != META and t.dim() > 0), None)
            if stray is not None and any(t.device == META for t in tensors):
                raise RuntimeError(mixing_error(f"when checking the arguments of {func.name()}", str(stray.device)))
            if stray is None and _runs_on_stand_ins(func) and any(t.device == META for t in tensors):
                try:
                    return _on_stand_ins(func, args, kwargs or {})
                except Exception:  # noqa: BLE001 - the meta kernel decides, as it did before
                    pass
        return func(*args, **(kwargs or {}))


def _arange_on_the_cpu(func, args: tuple, kwargs: dict) -> torch.Tensor | None:
    """torch.arange's output on meta, made by its CPU kernel, or None where the meta kernel is to
    decide (an argument that is not a number, a length past _LARGEST_STAND_IN, an error). Its meta
    kernel is a Python decomposition through PyTorch's references, whose first call imports
    torch._dynamo: a second of a kernel's time for positions made on the inputs' device."""
    if not all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args):
        return None
    start, end, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    if step == 0 or math.ceil((end - start) / step) > _LARGEST_STAND_IN:
        return None
    try:
        return _as_meta(func(*args, **{**kwargs, "device": torch.device("cpu")}))
    except Exception:  # noqa: BLE001 - the meta kernel raises its own error
        return None


def _stray_result(value: Any) -> str | None:
    """The device of a tensor the student's code returned that is not on meta (made on the CPU
    where the inputs were on meta: on a GPU the result would be on the CPU), or None."""
    for item in pytree.tree_leaves(value):
        if isinstance(item, torch.Tensor) and item.device != META:
            return str(item.device)
    return None


def on_meta(check: "Check", student: Any, inputs: "Inputs", spec: dict, guard: ForbiddenCalls) -> str | None:
    """What the case raised with its tensors (``inputs``, on meta; a class's parameters, which the
    check's call moves to the input's device) on the meta device, or None."""
    try:
        with quiet(), guard, _OnMeta():
            value = check.call(student, inputs, spec)
    except Exception as error:  # noqa: BLE001 - student code, or a data-dependent step meta cannot run
        return describe_error(error)
    stray = _stray_result(value)
    return None if stray is None else f"raised RuntimeError: {mixing_error('a result', stray)}"


def kept_tensors(student: Any) -> set[int]:
    """The tensors the student's object keeps beyond a call, where every call sees them: in its
    class's attributes (and those of the student's base classes), its functions' defaults and the
    globals they name (and the lists, tuples and dicts there). By id: only whether the real runs
    added one matters (``probe_all``)."""
    found: set[int] = set()
    functions, places = [], []
    classes = [c for c in getattr(student, "__mro__", ()) if not c.__module__.startswith(("torch", "builtins"))]
    for cls in classes:
        places += list(vars(cls).values())
        functions += [getattr(v, "__func__", v) for v in vars(cls).values()]
    functions.append(student)
    for function in functions:
        code = getattr(function, "__code__", None)
        if code is None:
            continue
        places += list(function.__defaults__ or ()) + list((function.__kwdefaults__ or {}).values())
        names = set(code.co_names) | {n for c in code.co_consts if hasattr(c, "co_names") for n in c.co_names}
        places += [function.__globals__[n] for n in names if n in function.__globals__]

    def collect(value: Any, depth: int = 0) -> None:
        if isinstance(value, torch.Tensor):
            found.add(id(value))
        elif depth < 3 and isinstance(value, (list, tuple, dict)):
            for item in (value.values() if isinstance(value, dict) else value):
                collect(item, depth + 1)

    for value in places:
        collect(value)
    return found


def probe_all(check: "Check", student: Any, cases: Sequence[Mapping[str, Any]], device: torch.device) -> Probed:
    __tracebackhide__ = True
    guard = ForbiddenCalls(check.forbidden)
    # on a GPU the real cases show device bugs themselves
    meta_runs = check.on_device and device.type == "cpu" and callable(student)
    kept_before = kept_tensors(student) if meta_runs else set()
    outcomes, likes, on_meta_inputs = [], [], []
    for case in cases:
        spec = check.spec(case)
        built = check.build(case)
        # the meta run's copy is taken before the real run can change the inputs in place; a case
        # whose memory is measured (a large one, in a cell of its own) has none: the others show devices
        on_meta_inputs.append(built.to(META) if meta_runs and not spec.get("memory_mib") else None)
        inputs = built.to(device)
        if not callable(student):
            outcomes.append(Outcome(error=f"expected a {check.kind}, got {type(student).__name__}"))
        else:
            outcomes.append(probe(check, student, inputs, spec, guard))
        likes.append(inputs.like)
    if meta_runs and not kept_tensors(student) <= kept_before:
        # the real runs left tensors where every call sees them (a class attribute, a global): a meta
        # run would meet them where a GPU run meets its own cuda tensors, a device bug that is none,
        # and would leave meta tensors there for the next cell's real runs
        meta_runs = False
    if meta_runs:
        # after every real case, so that nothing the meta runs leave behind changes a real outcome.
        # PyTorch runs meta kernels in Python, in its private implementations: the guard watches
        # operators only here
        guard.watch_code = False
        for case, outcome, like, inputs in zip(cases, outcomes, likes, on_meta_inputs):
            if outcome.error is None and like is not None and inputs is not None:
                outcome.meta_error = on_meta(check, student, inputs, check.spec(case), guard)
    return Probed(outcomes, likes, list(guard.seen))


def publish(name: str, probed: Probed, localising: dict | None = None) -> None:
    """The test cell's record, for the grader (only under the autograder), with the check's
    localising cases where they ran (``localise``)."""
    publish_record(name, probed.outcomes, probed.likes, probed.forbidden, localising)
