"""Per-test results and the status of one graded notebook.

Scores come from nbgrader's gradebook, where ``judge.SaveVerdicts`` put each test cell's
score; the message of each test is the grader's verdict on that cell (``CellVerdict``), which
``judge.JudgeTests`` wrote into the cell's metadata as data: nothing is read back from the
outputs, which only show the verdict in the feedback page.

Written answers (a cell that is both a solution and a grade cell, nbgrader's manually graded
answer) are graded by a person in formgrader, and counted apart: ``score`` and ``max_score``
are the autograded tests' points, ``written_points`` the written answers' points, and
``to_grade_by_hand`` those of them that await a person. nbgrader gives an answer left as
released ("YOUR ANSWER HERE") 0 and no score to any other: its points are pending, never
reported as lost. Each written answer is a test entry with ``manual`` set and no pass or fail.
"""
from __future__ import annotations

import enum
import re
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import get_args, get_type_hints

import nbformat

from autograder.cells import grade_id_of, is_written_answer


class Status(str, enum.Enum):
    """What became of a notebook, from best to worst: the worst of an assignment's notebooks is
    the assignment's status. A str: grades.csv, results.json and the LMS exports write its value."""

    OK = "ok"  # graded (its tests may still fail)
    TIMEOUT = "timeout"  # a cell or the notebook ran past its limit: graded up to there
    ERROR = "error"  # the kernel died, or grading itself failed
    INVALID = "invalid"  # a file that cannot be graded as this assignment's notebook
    MISSING = "missing"  # no notebook

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


STATUS_ORDER = list(Status)
MAX_MESSAGE_CHARS = 4000
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass
class CellResult:
    """What one graded cell earned: a test cell, or a written answer (graded by hand)."""

    grade_id: str
    points: float | None  # None: a written answer to be graded by hand
    max_points: float
    passed: bool | None  # None for written answers: a person gives them points, not a verdict
    message: str
    manual: bool = False  # a written answer, graded by hand in formgrader


# The grader's verdict on a test cell, in the cell's metadata of the autograded notebook
# (the kernel cannot write metadata, and JudgeTests removes any the submission brought).
VERDICT = "autograder_verdict"
# In the autograded notebook's metadata: the graded names whose cases failed and whose mistake no
# ladder of the kernel's localised (attention_checks.localise), written by JudgeTests.
UNLOCALISED = "autograder_unlocalised"


@dataclass(frozen=True)
class CellVerdict:
    """What the grader decided about one test cell: its score out of ``points``, and why."""

    score: float
    points: float
    message: str

    def write(self, cell) -> None:
        cell.metadata[VERDICT] = asdict(self)

    @classmethod
    def of(cls, cell) -> "CellVerdict | None":
        """The verdict JudgeTests wrote into ``cell``, if any."""
        data = cell.get("metadata", {}).get(VERDICT)
        return cls(**data) if isinstance(data, dict) else None

    @classmethod
    def composed(cls, score: float, points: float, parts: list[str]) -> "CellVerdict":
        """A verdict whose message is ``parts`` (texts in the order they happened), one per line,
        without terminal colours, cut at MAX_MESSAGE_CHARS."""
        text = _ANSI.sub("", "\n".join(p.strip() for p in parts if p.strip()))
        text = text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS] + " …(cut)"
        return cls(score, points, text)


HAND_GRADED = "graded by hand later"


@dataclass
class NotebookResult:
    student_id: str
    assignment: str
    notebook: str
    status: Status  # a str from JSON or the CSV becomes a Status (__post_init__)
    score: float
    max_score: float
    tests: list[CellResult] = field(default_factory=list)
    reason: str = ""
    written_points: float = 0.0  # the written answers' points: graded by hand, not in max_score
    to_grade_by_hand: float = 0.0  # of those, the points that await a person (answers not graded yet)
    late: bool = False  # the LMS marked it late (collect's report): reported; export --late-penalty penalises it
    # The autograded notebook (JSON), which formgrader shows for hand grading; the report writes
    # it to RESULTS/autograded/ and drops it, so it is never in results.json or kept in memory.
    autograded: str = field(default="", repr=False, compare=False)

    def __post_init__(self):
        self.status = Status(self.status)  # a Status, whether made here or read back from JSON

    @classmethod
    def failed(cls, student_id: str, assignment: str, notebook: str, status: Status, max_score: float,
               reason: str) -> "NotebookResult":
        """A notebook that earned nothing and says why: not graded (missing, invalid) or not
        gradable (error), its max score kept so that a grade sheet still sums."""
        return cls(student_id, assignment, notebook, status, 0.0, max_score, reason=reason)

    def to_json(self) -> dict:
        data = asdict(self)
        del data["autograded"]
        data["status"] = self.status.value  # plain JSON, whichever encoder or database column takes it
        return data

    @classmethod
    def from_json(cls, data: dict) -> "NotebookResult":
        """The result ``to_json`` gave (the cache reads results back this way)."""
        return _from_json(cls, data)


def _from_json(cls, data: dict):
    """A dataclass from its asdict(), field by field: a list of dataclasses (the tests) is
    built item by item, a field the data lacks keeps its default, an unknown one is an error."""
    unknown = set(data) - {f.name for f in fields(cls)}
    if unknown:
        raise ValueError(f"{cls.__name__} has no field {', '.join(sorted(unknown))}")
    hints = get_type_hints(cls)
    values = {}
    for name, value in data.items():
        args = get_args(hints[name])  # list[CellResult] -> (CellResult,)
        item = args[0] if len(args) == 1 else None
        values[name] = [_from_json(item, v) for v in value] if is_dataclass(item) else value
    return cls(**values)


def worst_status(statuses) -> Status:
    return max(map(Status, statuses), key=STATUS_ORDER.index)


def test_results(autograded: nbformat.NotebookNode, scores: dict[str, tuple[float | None, float]]) -> list[CellResult]:
    """One CellResult per graded cell, in notebook order.

    ``scores`` maps grade_id to (points, max_points) as recorded in the gradebook; points
    are None for a cell nbgrader leaves to a person (no automatic score: a written answer).
    """
    results = []
    for cell in autograded.cells:
        grade_id = grade_id_of(cell)
        if grade_id not in scores:
            continue
        points, max_points = scores[grade_id]
        if is_written_answer(cell):
            said = HAND_GRADED if points is None else f"not answered ({points:g} points)"
            results.append(CellResult(grade_id, points, max_points, None,
                                      f"written answer ({max_points:g} points): {said}", manual=True))
        else:
            verdict = CellVerdict.of(cell)
            results.append(CellResult(grade_id, points, max_points, points >= max_points,
                                      verdict.message if verdict else ""))
    return results


# What the grader itself observed while running a notebook, written by the executor
# (autograder.sandbox.SandboxedExecute) into the metadata of the cell where it happened:
# event -> (the error shown in that cell, the notebook's status, the notebook's reason). Never
# read from the cells' outputs, which the kernel writes: a student's exception named
# CellTimeoutError or DeadKernelError is the student's error, nothing more.
OBSERVED = "autograder_observed"
NOTEBOOK_TIMEOUT = ("the notebook ran past its time limit (--notebook-timeout) at this cell: it was stopped or never "
                    "started, and the cells after it did not run")
DEAD_KERNEL = "the kernel died while running this cell (exit, crash or out of memory); later cells did not run"
OUT_OF_MEMORY = ("the kernel was stopped while running this cell: the notebook's processes together held more than the "
                 "memory limit (--memory); later cells did not run")
SPAWNED = ("the notebook's code started a thread or a process, seen when this cell ended: a grading kernel runs the "
           "student's code in one thread of one process, where the checks see it; later cells did not run")
EVENTS = {
    "cell_timeout": ("CellTimeoutError", "the cell did not finish in time", Status.TIMEOUT,
                     "a cell ran past the time limit and was interrupted"),
    "notebook_timeout": ("CellTimeoutError", NOTEBOOK_TIMEOUT, Status.TIMEOUT,
                         "the notebook ran past its time limit; the cells after that did not run"),
    "dead_kernel": ("DeadKernelError", DEAD_KERNEL, Status.ERROR, DEAD_KERNEL),
    "out_of_memory": ("DeadKernelError", OUT_OF_MEMORY, Status.ERROR, OUT_OF_MEMORY),
    "spawned": ("ThreadsForbidden", SPAWNED, Status.ERROR, SPAWNED),
    # not an error: the kernel ran on without the process the OOM killer stopped
    "process_out_of_memory": ("", "", Status.OK, "out of memory: the notebook's processes together held more than "
                              "the memory limit (--memory), so one of them was stopped; the kernel ran on"),
    # not an error: the notebook ran on, what it printed from here on is not kept
    "output_cut": ("", "", Status.OK, "output cut: the notebook's cells printed more than the output kept per notebook "
                   "(8 MiB); the rest was dropped, the tests still ran"),
}
OUTPUT_CUT = "[output cut: the notebook's outputs passed the size kept per notebook; nothing more is kept]"


def observed(cell) -> str | None:
    """The event the executor observed in this cell, if any."""
    event = cell.get("metadata", {}).get(OBSERVED)
    return event if event in EVENTS else None


def executor_error(event: str | None) -> list:
    """The error output the executor shows in the cell where ``event`` happened, if it shows one."""
    ename, evalue = EVENTS[event][:2] if event else ("", "")
    return [nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])] if ename else []


# How much memory a test cell's kernel used, in bytes ({"used": n}), measured from outside by the
# sandbox (SandboxedExecute._note_memory).
MEMORY = "autograder_memory"


def memory_used(cell) -> int | None:
    """How much memory the kernel used while ``cell`` ran, in bytes, or None where the grader did
    not measure it."""
    note = cell.get("metadata", {}).get(MEMORY)
    used = note.get("used") if isinstance(note, dict) else None
    return used if isinstance(used, int) else None


def observed_status(autograded: nbformat.NotebookNode) -> tuple[Status, str]:
    """(status, reason) from what the executor observed: the worst event's, (OK, "") if none."""
    events = [e for e in map(observed, autograded.cells) if e]
    if not events:
        return Status.OK, ""
    worst = max(events, key=lambda e: STATUS_ORDER.index(EVENTS[e][2]))
    status, reason = EVENTS[worst][2:]
    return status, reason + ("; the tests that ran still count" if status == Status.ERROR else "")
