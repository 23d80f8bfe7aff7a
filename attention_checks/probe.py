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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from .core import ForbiddenCalls, describe_error, is_stub, quiet
from .record import Outcome, publish as publish_record

if TYPE_CHECKING:
    from .registry import Check, Inputs


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


def probe(check: "Check", student: Any, inputs: "Inputs", spec: dict, guard: ForbiddenCalls) -> Outcome:
    """One call of the student's code; any failure is this case's."""
    before = _snapshot(inputs)
    try:
        with quiet(), guard:
            value = check.call(student, inputs, spec)
    except Exception as error:  # noqa: BLE001 - student code
        return Outcome(error=describe_error(error), not_implemented=is_stub(error),
                       modified=_changed(inputs, before))
    return Outcome(value, modified=_changed(inputs, before))


META = torch.device("meta")


# Operators that take tensors of two devices on CUDA too: copies between devices, and indexing
# with CPU index tensors.
_CROSS_DEVICE = {torch.ops.aten.copy_.default, torch.ops.aten._to_copy.default, torch.ops.aten.index.Tensor,
                 torch.ops.aten.index_put_.default, torch.ops.aten.index_put.default,
                 torch.ops.aten._index_put_impl_.default, torch.ops.aten.lift_fresh.default}


def mixing_error(where: str, found: str) -> str:
    """The error a GPU raises where a tensor on ``found`` meets the inputs (on meta here)."""
    return f"Expected all tensors to be on the same device, but found at least two devices, meta and {found}! ({where})"


class _OnMeta(TorchDispatchMode):
    """The rules of a GPU on the meta device, for every operator.

    Lets code that reads a value from a meta tensor go on: ``.item()``, ``bool(t)`` and
    ``torch.equal`` answer 0 or False instead of raising. nn.TransformerEncoder itself asks
    ``torch.equal(mask, causal)``, so without this every case with a mask would stop there,
    before the student's layers, and their device bugs would go unseen. A made-up value can
    only pick a branch; what the meta run reports is still a real device-mixing error.

    And checks the devices of every operator's tensors itself: a CPU tensor with dimensions
    meeting a meta one is an error, as it is on CUDA. Most meta kernels check that, but not all
    (``@``, ``bmm``, ``baddbmm``, ``einsum`` take a CPU operand on meta)."""

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
        if func not in _CROSS_DEVICE:
            tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
            stray = next((t for t in tensors if t.device != META and t.dim() > 0), None)
            if stray is not None and any(t.device == META for t in tensors):
                raise RuntimeError(mixing_error(f"when checking the arguments of {func.name()}", str(stray.device)))
        return func(*args, **(kwargs or {}))


def _stray_result(value: Any) -> str | None:
    """The device of a tensor the student's code returned that is not on meta (made on the CPU
    where the inputs were on meta: on a GPU the result would be on the CPU), or None."""
    for item in pytree.tree_leaves(value):
        if isinstance(item, torch.Tensor) and item.device != META:
            return str(item.device)
    return None


def on_meta(check: "Check", student: Any, case: Mapping[str, Any], guard: ForbiddenCalls) -> str | None:
    """What the case raised with its tensors (and a class's parameters, which the check's call moves
    to the input's device) on the meta device, or None."""
    inputs = check.build(case).to(META)
    try:
        with quiet(), guard, _OnMeta():
            value = check.call(student, inputs, check.spec(case))
    except Exception as error:  # noqa: BLE001 - student code, or a data-dependent step meta cannot run
        return describe_error(error)
    stray = _stray_result(value)
    return None if stray is None else f"raised RuntimeError: {mixing_error('a result', stray)}"


def probe_all(check: "Check", student: Any, cases: Sequence[Mapping[str, Any]], device: torch.device) -> Probed:
    __tracebackhide__ = True
    guard = ForbiddenCalls(check.forbidden)
    outcomes, likes = [], []
    for case in cases:
        spec = check.spec(case)
        inputs = check.build(case).to(device)
        if not callable(student):
            outcomes.append(Outcome(error=f"expected a {check.kind}, got {type(student).__name__}"))
        else:
            outcomes.append(probe(check, student, inputs, spec, guard))
        likes.append(inputs.like)
    if check.on_device and device.type == "cpu" and callable(student):
        # after every real case, so that nothing the meta runs leave behind changes a real outcome;
        # on a GPU the real cases show device bugs themselves. PyTorch runs meta kernels in Python,
        # in its private implementations: the guard watches operators only here
        guard.watch_code = False
        for case, outcome, like in zip(cases, outcomes, likes):
            if outcome.error is None and like is not None:
                outcome.meta_error = on_meta(check, student, case, guard)
    return Probed(outcomes, likes, list(guard.seen))


def publish(name: str, probed: Probed) -> None:
    """The test cell's record, for the grader (only under the autograder)."""
    publish_record(name, probed.outcomes, probed.likes, probed.forbidden)
