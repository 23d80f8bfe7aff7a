"""Checks used by the test cells of the course's exercise notebooks.

Each graded name is a declared check (``registry.Check``), in one module per assignment
(``qkv`` for 03-qkv): inputs and how to call the student's object, nothing that judges.
``probe`` runs the student's code in the kernel; ``answers`` (references, mistakes, hints,
verdicts) judges it, in the student's own notebook or, under the autograder, in the grader.
``core``, ``inputs`` and ``modules`` are shared by every assignment; ``record`` is the wire
format between a grading kernel and the grader.
"""

from .core import TOLERANCES, CheckFailed, PartialCredit, pick_device

__all__ = ["TOLERANCES", "CheckFailed", "PartialCredit", "pick_device"]
