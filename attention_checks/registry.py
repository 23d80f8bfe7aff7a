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
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch

from .allowlist import uses_outside
from .cases import Inputs, Spec, call_function, describe_inputs, snake_case
from .core import ALWAYS_FORBIDDEN, case_seed, generator, pick_device, with_defaults
from .localise import Axes, recorded_ladder
from .probe import kept_tensors, probe_all, publish
from .record import recording


class Mode(enum.Enum):
    STUDENT = "student"
    RECORD = "record"


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
    axes: Axes | None = None  # the ladder of small cases that localises a mistake by experiment (localise)

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
        device = self.device(device)
        # a grading kernel runs the check's localising cases after the declared ones where it sees a
        # failure or the grader asks for them (localise.recorded_ladder)
        kept = kept_tensors(student) if mode is Mode.RECORD and self.axes is not None else None
        probed = probe_all(self, student, cases, device)
        if mode is Mode.RECORD:
            ladder = None if kept is None else recorded_ladder(self, student, probed.outcomes,
                                                               not kept_tensors(student) <= kept)
            publish(self.name, probed, ladder)
            return None
        # the student's own notebook: judged here, by the references where they are installed (the
        # course's repository), else by the answers published as data for the visible cases
        # (published). Imported here: a grading kernel, which only records, has no judge to import.
        from .answers.judging import judge

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
# published (the visible cases' answers as data), allowlist (what graded code may use), localise
# (the cases that find where a mistake lies) and toy_models (fixed models the checks hand over);
# every other module of the package declares an assignment's checks.
MACHINERY = {"core", "cases", "record", "registry", "probe", "localise", "inputs", "modules", "toy_models", "answers",
             "submit", "published", "allowlist"}


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
