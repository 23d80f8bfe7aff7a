"""Declared checks: one object per graded name, and the registry every tool iterates.

A test cell calls a declared check as a function::

    check_scaled_dot_product_attention(scaled_dot_product_attention, points=2, cases=[dict(L=5), ...])

A declaration (``Check``) holds only what the student's kernel may know: the graded name, the
case keys and their defaults, how to build a case's *inputs* from its spec (on the CPU, from a
seed) and how to call the student's object on them, and which PyTorch functions it must not
call. What judges the result (the float64 reference, the known mistakes and their hints)
lives in ``attention_checks.answers.<module>``, found by the check's name, and the grading
sandbox does not mount that folder: under the autograder a kernel holds inputs and what the
student's code returned, never an answer. Students get no such module at all: their checks
judge the visible cases from the answers published as data (``published``).

Where a check runs is explicit, a ``Mode``:

* ``STUDENT``  the student's own notebook: probe, then judge here and print the report;
* ``RECORD``   a grading kernel: probe and record the outcomes, judge nothing;
* the grader judges the recorded outcomes in its own process (``answers.judging.judge_records``).
"""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch

from .core import ALWAYS_FORBIDDEN, case_seed, describe, generator, pick_device, with_defaults
from .record import recording

Spec = dict[str, Any]


class Mode(enum.Enum):
    STUDENT = "student"
    RECORD = "record"


def _map_tensors(value: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, dict):
        return {k: _map_tensors(v, fn) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_map_tensors(v, fn) for v in value)
    return value


def _as_reference(t: torch.Tensor) -> torch.Tensor:
    """A CPU copy, float64 for floating tensors (bool and integer tensors keep their dtype)."""
    dtype = torch.float64 if t.is_floating_point() else t.dtype
    return t.detach().to("cpu", dtype, copy=True)


@dataclass(frozen=True)
class Inputs:
    """What one case hands to the student's code."""

    args: dict[str, Any]  # passed positionally, in this order
    kwargs: dict[str, Any] = field(default_factory=dict)  # passed by name
    extra: dict[str, Any] = field(default_factory=dict)  # what `call` uses besides (constructor args, state dicts)
    note: str = ""  # added to the description, e.g. "(lengths 3, 5)"

    def to(self, device: torch.device) -> "Inputs":
        move = lambda t: t.to(device)  # noqa: E731
        return replace(self, args=_map_tensors(self.args, move), kwargs=_map_tensors(self.kwargs, move),
                       extra=_map_tensors(self.extra, move))

    def as_reference(self) -> "Inputs":
        """CPU float64 copies of every tensor: what references and mistakes are computed on."""
        return replace(self, args=_map_tensors(self.args, _as_reference),
                       kwargs=_map_tensors(self.kwargs, _as_reference), extra=_map_tensors(self.extra, _as_reference))

    @property
    def named(self) -> dict[str, Any]:
        return {**self.args, **self.kwargs}

    @property
    def like(self) -> torch.Tensor | None:
        """The input whose dtype and device the outputs must have: the first floating tensor, else the
        first tensor (token ids, boolean masks: the outputs follow their device)."""
        tensors = [v for v in self.named.values() if isinstance(v, torch.Tensor)]
        return next((t for t in tensors if t.is_floating_point()), tensors[0] if tensors else None)


def call_function(fn: Callable, inputs: Inputs, spec: Spec) -> Any:
    return fn(*inputs.args.values(), **inputs.kwargs)


def describe_inputs(inputs: Inputs, spec: Spec) -> str:
    text = describe(inputs.named, like=inputs.like, with_dtype=[k for k, v in inputs.named.items()
                                                              if isinstance(v, torch.Tensor) and not v.is_floating_point()])
    return text + (f" {inputs.note}" if inputs.note else "")


def snake_case(name: str) -> str:
    """LayerNorm -> layer_norm, LSTMAttentionPooling -> lstm_attention_pooling."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


@dataclass(frozen=True, eq=False)
class Check:
    """One graded name: everything about its check that the student's kernel may know."""

    name: str  # the graded name, as the notebook defines it: "softmax", "LayerNorm"
    assignment: str  # "02-softmax-scaling"
    defaults: Mapping[str, Any]  # every case key and its default
    inputs: Callable[[Spec, torch.Generator], Inputs]  # a case's inputs, on the CPU, from its seed
    outputs: tuple[str, ...] = ("output",)  # what the student returns: one value, or a tuple of these
    call: Callable[[Any, Inputs, Spec], Any] = call_function  # runs the student's object on a case
    describe: Callable[[Inputs, Spec], str] = describe_inputs  # a case, for reports
    forbidden: Mapping[Any, str] = field(default_factory=dict)  # function (or "aten::op") -> name shown
    kind: str = "function"  # or "class": what the student hands the check
    on_device: bool = True  # False: the case runs on the CPU on every machine (no tensor inputs)
    answers: str = ""  # module of attention_checks.answers that judges it (default: the declaring module's name)

    @property
    def forbidden_names(self) -> list[str]:
        """Every name a forbidden use is reported by: the check's own, and those every graded
        object is forbidden (PyTorch's private implementations, switching off the watch)."""
        return sorted(set(self.forbidden.values()) | set(ALWAYS_FORBIDDEN))

    @property
    def function_name(self) -> str:
        """The name test cells call it by: check_<graded name in snake case>."""
        return f"check_{snake_case(self.name)}"

    @property
    def answers_module(self) -> str:
        return f"{__package__}.answers.{self.answers or self.inputs.__module__.rsplit('.', 1)[-1]}"

    def spec(self, case: Mapping[str, Any]) -> Spec:
        return with_defaults(case, self.defaults)

    def build(self, case: Mapping[str, Any]) -> Inputs:
        """A case's inputs on the CPU: the same on every machine and in every process."""
        return self.inputs(self.spec(case), generator(case_seed(case, self.name)))

    def device(self, device: torch.device | None = None) -> torch.device:
        return (device or pick_device()) if self.on_device else torch.device("cpu")

    def __call__(self, student: Any, *, points: float, cases: Sequence[Mapping[str, Any]],
                 device: torch.device | None = None):
        """What a test cell calls: records under the autograder, else judges here."""
        __tracebackhide__ = True
        return self.run(student, points=points, cases=cases, device=device,
                        mode=Mode.RECORD if recording() else Mode.STUDENT)

    def run(self, student: Any, *, points: float, cases: Sequence[Mapping[str, Any]], mode: Mode,
            device: torch.device | None = None):
        __tracebackhide__ = True
        from .probe import probe_all, publish

        device = self.device(device)
        probed = probe_all(self, student, cases, device)
        if mode is Mode.RECORD:
            publish(self.name, probed)
            return None
        # the student's own notebook: judged here, by the references where they are installed (the
        # course's repository), else by the answers published as data for the visible cases (published)
        from .answers.judging import judge

        from .allowlist import uses_outside

        devices = [str(like.device) if like is not None else "cpu" for like in probed.likes]
        return judge(self, cases, probed.outcomes, points=points,
                     forbidden=[*probed.forbidden, *uses_outside(student)], devices=devices).deliver()


REGISTRY: dict[str, Check] = {}  # function name (check_...) -> check


def declare(check: Check) -> Check:
    """Register a check; its function name must be new."""
    if check.function_name in REGISTRY:
        raise ValueError(f"{check.function_name} is declared twice")
    REGISTRY[check.function_name] = check
    return check


# The package's own machinery, submit (how a notebook hands itself in to a submission service),
# published (the visible cases' answers as data) and allowlist (what graded code may use); every
# other module of the package declares an assignment's checks.
MACHINERY = {"core", "record", "registry", "probe", "inputs", "modules", "answers", "submit", "published",
             "allowlist"}


def check_modules() -> list[str]:
    """The modules that declare checks (one per assignment), found on disk: a new assignment's
    module is graded, preloaded and tested without being listed anywhere."""
    import pkgutil
    from pathlib import Path

    here = [str(Path(__file__).parent)]
    return sorted(f"{__package__}.{m.name}" for m in pkgutil.iter_modules(here) if m.name not in MACHINERY)


def load_all() -> dict[str, Check]:
    """Import every check module: the registry then holds every declared check."""
    import importlib

    for module in check_modules():
        importlib.import_module(module)
    return REGISTRY


def checks(assignment: str | None = None) -> Iterator[Check]:
    for check in load_all().values():
        if assignment is None or check.assignment == assignment:
            yield check
