"""What an answer module declares: each graded name's ``Answer`` (its reference and its known
``Mistake``s, some recognised by a ``Fit``), and the helpers answer modules share.

Data and the few functions that name mistakes; nothing here judges. The published answers
(``..published``) are made of these types too, so this module ships with the checks.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

import torch

from ..core import STRUCTURE_SHARE, TOLERANCES
from .fits import FITS

if TYPE_CHECKING:
    from ..cases import Inputs, Spec




@dataclass(frozen=True)
class Fit:
    """A test on the student's outputs: one of ``answers.fits`` by name, with its arguments as data
    (tensors and plain values, which the published data can hold)."""

    test: str
    args: dict[str, Any]

    def __call__(self, got: Mapping[str, Any]) -> bool:
        return FITS[self.test](got, **self.args)


@dataclass(frozen=True)
class Depends:
    """A mistake whose cause depends on whether other graded names of the notebook pass their own
    tests (a training run trains a model built from the student's classes: a forward pass that
    differs there, or one that does not, are two causes). Where the grader saw every one of
    ``names`` pass, the hint is ``passed``; where it saw some fail, it names them and says
    ``failed``; else (the student's own notebook, judged one test at a time) the mistake's own
    hint, which words both conditions."""

    names: tuple[str, ...]
    passed: str
    failed: str  # after "Your Decoder fails its own tests above: "

    def said(self, seen: Mapping[str, bool]) -> str | None:
        """The hint for ``seen`` (graded name -> whether every test of it passed so far), or None
        where it does not decide."""
        failed = [name for name in self.names if seen.get(name) is False]
        if failed:
            names = " and ".join([", ".join(failed[:-1]), failed[-1]] if len(failed) > 1 else failed)
            one = len(failed) == 1
            return f"Your {names} fail{'s' * one} {'its' if one else 'their'} own tests above: {self.failed}"
        return self.passed if all(seen.get(name) for name in self.names) else None


@dataclass
class Mistake:
    """What a specific buggy implementation would return, and a hint about it.

    Most mistakes are one output: the buggy version's, computed on the case's inputs. A mistake
    whose output is not one value (a decoder that samples its tokens, a training run that stops
    learning) gives `fits` instead: a test on the student's outputs (name -> value); `outputs`
    then only names what it explains (its values None). `depends`: a hint that the other graded
    names' own tests decide (Depends). `draws`: the mistake draws at random (a decoder that samples):
    withdrawn where the check's localising cases saw the code give the same outputs from two seeds.
    `parts`: the mistakes merge_twins merged into this one (each keeps its own depends and draws)."""

    hint: str
    outputs: dict[str, Any]  # output name -> CPU float64 tensor or plain value; None or absent: not determined
    fits: Fit | None = None
    depends: Depends | None = None
    draws: bool = False
    parts: tuple["Mistake", ...] = ()

    @property
    def members(self) -> tuple["Mistake", ...]:
        """The mistakes this one stands for: its parts where it merges twins, else itself."""
        return self.parts or (self,)


def merge_twins(mistakes: Mapping[str, Mistake]) -> dict[str, Mistake]:
    """The mistakes, those with the same outputs (at float64's tolerance) merged into one whose hint
    names each of them: where two bugs give the same result on a case (a one-layer stack, a mask
    dropped by the layer or by the model that calls it), the hint must not pick one."""
    def same(a: Any, b: Any) -> bool:
        if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
            return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                    and torch.allclose(a.to(torch.float64), b.to(torch.float64), equal_nan=True,
                                       **TOLERANCES[torch.float64]))
        return type(a) is type(b) and a == b

    def twins(m: Mistake, n: Mistake) -> bool:
        determined = lambda o: {k: v for k, v in o.outputs.items() if v is not None}  # noqa: E731
        mo, no = determined(m), determined(n)
        return (m.fits is None and n.fits is None and bool(mo) and mo.keys() == no.keys()
                and all(same(mo[k], no[k]) for k in mo))

    merged: dict[str, Mistake] = {}
    taken: set[str] = set()
    for name, mistake in mistakes.items():
        if name in taken:
            continue
        group = [mistake] + [other for other_name, other in mistakes.items()
                             if other_name != name and other_name not in taken and twins(mistake, other)]
        taken |= {other_name for other_name, other in mistakes.items() if any(other is g for g in group)}
        merged[name] = mistake if len(group) == 1 else \
            Mistake(one_of(g.hint for g in group), mistake.outputs, parts=tuple(g for m in group for g in m.members))
    return merged


ONE_OF = "One of these mistakes gives your result (this case cannot tell them apart): "


def one_of(hints: Iterable[str]) -> str:
    """One hint, or several mistakes named as the possibilities they are (never one picked)."""
    hints = list(dict.fromkeys(hints))
    if len(hints) == 1:
        return hints[0]
    return ONE_OF + " Or: ".join(hints)


def named_mistakes(hint: str) -> list[str]:
    """The hints of the mistakes a hint names (one_of's possibilities, each once)."""
    return hint.removeprefix(ONE_OF).split(" Or: ") if hint.startswith(ONE_OF) else [hint]




def swapped_outputs(expected: Mapping[str, Any], what: str = "Your function") -> dict[str, Mistake]:
    """Two outputs returned in the wrong order, (b, a) for (a, b): one diagnosis for every check
    that returns a pair (`what` names the code that returns it, e.g. "Your forward")."""
    if len(expected) != 2:
        return {}
    a, b = expected
    return {"swapped": Mistake(f"{what} returns ({b}, {a}): return ({a}, {b}) in this order.",
                               {a: expected[b], b: expected[a]})}


def no_mistakes(x: "Inputs", spec: "Spec", expected: Mapping[str, Any]) -> dict[str, Mistake]:
    return {}


@dataclass(frozen=True)
class Answer:
    """How a check is judged: the reference and the known mistakes, both on float64 CPU inputs."""

    reference: Callable[["Inputs", "Spec"], dict[str, Any]]  # output name -> expected value
    mistakes: Callable[["Inputs", "Spec", Mapping[str, Any]], dict[str, Mistake]] = no_mistakes
    # what outputs of the right shape, dtype and device earn when their values are wrong (0: a right
    # structure is no achievement, as for tokens any random source draws)
    structure_share: float = STRUCTURE_SHARE
