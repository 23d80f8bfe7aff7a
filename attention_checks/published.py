"""The answers of the visible cases, as data: what a student's own notebook judges with.

The course's references and known mistakes (``attention_checks.answers.<assignment>``) stay with
the grader: code that computes a graded function's answer would earn its points if a student
copied it. When the course is published (``python -m autograder publish``), the grader computes,
for every case of every visible test of every released notebook, the expected outputs and each
known mistake's outputs with its hint, and writes them into ``visible/``:

* ``<assignment>.json``  the manifest: for each case (check name, case as its test cell writes
  it), the expected outputs and the mistakes (hint text, outputs), every tensor named;
* ``<assignment>.pt``    those tensors, a flat dict of plain tensors (loaded with
  ``weights_only=True``: data, never code).

Here ``PUBLISHED`` reads them back as ``answers.judging`` asks (expected outputs, mistakes), so
that a visible test says what the references would say. What reads a student's outputs without
computing an answer ships as code: a check's own reading of a crash (``answers.crashes``, from
the error and the inputs) and the tests of the mistakes that are not one output
(``answers.fits``, whose arguments, the right answer among them, are in the data). A case
not in the data (a visible test whose cases were edited) is not judged here: the report says so.
"""
from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from .answers.catalogue import Fit, Mistake

if TYPE_CHECKING:
    from .answers.judging import Judged
    from .cases import Inputs, Spec
    from .registry import Check

FOLDER = Path(__file__).with_name("visible")
FORMAT = 1


def encode(value: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """``value`` as JSON, its tensors added to ``tensors`` (named t0, t1, ...) and named in it."""
    if isinstance(value, torch.Tensor):
        name = f"t{len(tensors)}"
        tensors[name] = value.detach().to("cpu").contiguous().clone()
        return {"tensor": name}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": repr(value)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):
        return {"tuple": [encode(v, tensors) for v in value]}
    if isinstance(value, list):
        return [encode(v, tensors) for v in value]
    if isinstance(value, dict):
        return {"dict": [[encode(k, tensors), encode(v, tensors)] for k, v in value.items()]}
    raise TypeError(f"cannot publish a {type(value).__name__} as data")


def decode(value: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(value, list):
        return [decode(v, tensors) for v in value]
    if not isinstance(value, dict):
        return value
    (kind, inner), = value.items()
    if kind == "tensor":
        return tensors[inner]
    if kind == "dtype":
        return getattr(torch, inner)
    if kind == "float":
        return float(inner)
    if kind == "tuple":
        return tuple(decode(v, tensors) for v in inner)
    return {decode(k, tensors): decode(v, tensors) for k, v in inner}


def paths(assignment: str, folder: Path = FOLDER) -> tuple[Path, Path]:
    """The manifest and the tensors of one assignment."""
    return folder / f"{assignment}.json", folder / f"{assignment}.pt"


def _encode_mistake(mistake: dict[str, Any], tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
    fit = mistake.get("fits")
    return {"hint": mistake["hint"], "outputs": encode(mistake["outputs"], tensors),
            "fits": None if fit is None else {"test": fit.test, "args": encode(fit.args, tensors)}}


def _decode_mistake(mistake: dict[str, Any], tensors: dict[str, torch.Tensor]) -> Mistake:
    fit = mistake.get("fits")
    return Mistake(mistake["hint"], decode(mistake["outputs"], tensors),
                   None if fit is None else Fit(fit["test"], decode(fit["args"], tensors)))


def write(assignment: str, cases: list[dict[str, Any]], folder: Path) -> list[Path]:
    """Write one assignment's data; ``cases``: dicts of check, case (its key), expected, mistakes
    (each a dict of hint, outputs and fits, a judging.Fit or None), structure_share (what the right
    structure earns with wrong values). Returns the files written."""
    tensors: dict[str, torch.Tensor] = {}
    manifest = {"format": FORMAT, "assignment": assignment,
                "cases": [{"check": c["check"], "case": c["case"], "expected": encode(c["expected"], tensors),
                           "mistakes": [_encode_mistake(m, tensors) for m in c["mistakes"]],
                           "structure_share": c["structure_share"]} for c in cases]}
    folder.mkdir(parents=True, exist_ok=True)
    manifest_path, tensors_path = paths(assignment, folder)
    manifest_path.write_text(json.dumps(manifest, indent=1, ensure_ascii=False, sort_keys=True) + "\n",
                             encoding="utf-8")
    torch.save(tensors, tensors_path)
    return [manifest_path, tensors_path]


@functools.cache
def load(folder: Path = FOLDER) -> dict[tuple[str, str], dict[str, Any]]:
    """(check name, case key) -> {"expected": ..., "mistakes": [Mistake, ...]}, from every
    assignment's data in ``folder`` (a check declared by one assignment may be tested in another's
    notebook: 05-masks tests 04's MultiHeadAttention with masks). Empty when none was published."""
    found = {}
    for manifest_path in sorted(folder.glob("*.json")):
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        tensors = torch.load(manifest_path.with_suffix(".pt"), map_location="cpu", weights_only=True)
        found.update({(c["check"], c["case"]): {"expected": decode(c["expected"], tensors),
                                                "mistakes": [_decode_mistake(m, tensors) for m in c["mistakes"]],
                                                "structure_share": c["structure_share"]}
                      for c in manifest["cases"]})
    return found


class NotPublished(LookupError):
    """A case whose answers a source does not hold (its message is the report)."""


class Published:
    """The answers of the published visible cases (an answer source of ``answers.judging``)."""

    def __init__(self, folder: Path = FOLDER):
        self.folder = folder

    def _case(self, check: "Check", key: str) -> dict[str, Any]:
        found = load(self.folder).get((check.name, key))
        if found is None:
            raise NotPublished(
                f"this case is not one of the visible cases the course published ({key}), so your notebook "
                "cannot judge it: the answers of the visible tests come as data with the checks, for their "
                "cases as released. Put the test's cases back as they were (the grader judges the released "
                "tests and the hidden ones, whatever this copy says)")
        return found

    def expected(self, check: "Check", key: str, x: "Inputs", spec: "Spec") -> dict[str, Any]:
        return self._case(check, key)["expected"]

    def mistakes(self, check: "Check", case: "Judged") -> list[Mistake]:
        return self._case(check, case.key)["mistakes"]

    def structure_share(self, check: "Check", key: str) -> float:
        return self._case(check, key)["structure_share"]


PUBLISHED = Published()
