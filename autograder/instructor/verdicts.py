"""A failing test's message (results.json), read back into what it says: which graded name
(function or class) it judged, the hints that diagnose the student's mistake, the exceptions
the student's code raised, and the first failing case's inputs (their shapes).

The messages are the checks' reports (attention_checks/answers/judging.py): a first line
``✗ NAME: 3 of 4 cases fail (...)`` (or ``✗ NAME is not implemented yet``, ``✗ NAME calls
torch.softmax, which this exercise asks you to write yourself...``), then one block per
failing case (a passing test: ``✓ NAME: all 4 cases pass ...``)::

    case 2: query (2, 4, 8), key (2, 6, 8), value (2, 6, 6); float32 on cpu
        raised AttributeError: 'NoneType' object has no attribute 'dtype'
          at: if attn_mask.dtype == torch.bool:
        hint: `attn_mask` may be None (here it is): ask `if attn_mask is not None:` ...

A hint is given once, where it first applies (later cases say "as above"). Only the text is
read: the LMS comments and the class report show what the student's feedback page shows.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_HEAD = re.compile(r"^[✓✗] (?P<name>[\w.]+)(?::| is not implemented| calls )")
_CASE = re.compile(r"^case \d+: (?P<inputs>.+)$")
_HINT = re.compile(r"^\s+hint: (?P<hint>.+)$")
_RAISED = re.compile(r"^\s+(?:\S+ : )?raised (?P<exception>[A-Za-z_][\w.]*)")
_FORBIDDEN = re.compile(r"^✗ \S+ (?P<verdict>calls .+?, which this exercise asks you to write yourself)")
NOT_IMPLEMENTED = "not implemented yet"
AS_ABOVE = "as above"


@dataclass
class Verdict:
    """What one failing test's message says."""

    name: str  # the graded function or class ("" when the message names none)
    # each diagnosis once, in order, with the inputs of the case it was given for ("query (2, 5, 8), ...")
    hints: dict[str, str] = field(default_factory=dict)
    exceptions: dict[str, str] = field(default_factory=dict)  # exception types the student's code raised, the same
    not_implemented: bool = False

    @property
    def summary(self) -> str:
        """One line for a plain-text comment: the hints, else the exception, else nothing."""
        if self.not_implemented:
            return NOT_IMPLEMENTED
        if self.hints:
            return " / ".join(self.hints)
        return f"raised {next(iter(self.exceptions))}" if self.exceptions else ""


def read_verdict(message: str, grade_id: str = "") -> Verdict:
    """The verdict of a test's ``message``; ``grade_id`` names a message without a ``✗ NAME``
    or ``✓ NAME`` line (a test cell whose own code failed)."""
    lines = message.splitlines()
    head = _HEAD.match(lines[0]) if lines else None
    verdict = Verdict(head["name"] if head else "")
    if lines and NOT_IMPLEMENTED in lines[0] and head:
        verdict.not_implemented = True
    forbidden = _FORBIDDEN.match(lines[0]) if lines else None
    if forbidden:
        verdict.hints[forbidden["verdict"]] = ""
    inputs = ""
    for line in lines[1:]:
        case, hint, raised = _CASE.match(line), _HINT.match(line), _RAISED.match(line)
        if case:
            inputs = case["inputs"]
        elif hint and hint["hint"] != AS_ABOVE:
            verdict.hints.setdefault(hint["hint"], inputs)
        elif raised:
            verdict.exceptions.setdefault(raised["exception"], inputs)
    if not verdict.name:
        verdict.name = grade_id
    return verdict
