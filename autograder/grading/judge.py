"""The grader's verdict on every test cell, computed outside the student's kernel.

In the kernel, each check only records what the student's code returned (see
``attention_checks.record``); the kernel holds inputs, never an answer. ``JudgeTests``
replaces the outputs of each test cell by running the test cell's own source (restored
from the source notebook) in the grader's process, where each check name means
``JudgedCheck``: take the cell's next record, rebuild the cases, compute the references
(``attention_checks.answers``) and judge. Monkeypatching the checks, torch or the verdict
inside the kernel changes nothing here; a record the cell's checks did not emit scores the
cell 0. The grader also reads the student's source for forbidden calls
(``autograder.grading.scanner``), since a kernel could hide them from the in-kernel detector.
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import io
import re
from dataclasses import replace
from types import CodeType
from typing import Any, Sequence

from IPython.core.inputtransformer2 import TransformerManager
from nbformat.v4 import new_output
from nbgrader.preprocessors import NbGraderPreprocessor, SaveAutoGrades

from attention_checks import registry
from attention_checks.answers.judging import AS_IS, Quoting, Report, Sealed, judge_records
from attention_checks.core import PartialCredit
from attention_checks.record import MIME

from autograder.cells import (MEMORY_BOUND, grade_id_of, holds_hidden_tests, is_student_cell, is_test_cell,
                             nbgrader_metadata)
from autograder.grading.scanner import SourceScanner, StudentObject
from autograder.results import UNLOCALISED, VERDICT, CellVerdict, executor_error, memory_used, observed


class _CellNamespace(dict):
    """Local names of a replayed test cell: unknown names are the student's objects."""

    def __init__(self, shared: dict):
        super().__init__()
        self.shared = shared

    def __missing__(self, name: str):
        if name in self.shared or hasattr(builtins, name):
            raise KeyError(name)  # found in the globals or the builtins instead
        return StudentObject(name)


class Replay:
    """A test cell's records, taken in order by the checks the grader re-runs. The genuine
    checks of a test cell emit exactly one record each, in order: anything else was forged."""

    def __init__(self, records: Sequence[Any]):
        self.records = list(records)
        self.tampered = False

    def take(self, check: str) -> dict | None:
        if not self.records:
            return None  # the cell did not run to this check: no record, no points
        record = self.records.pop(0)
        if isinstance(record, dict) and record.get("check") == check:
            return record
        self.tampered = True
        return None

    @property
    def genuine(self) -> bool:
        """Every record was taken, each by the check that emits it."""
        return not self.tampered and not self.records


class CellsThatDoNotRun:
    """The student's cells that Python cannot compile (a SyntaxError, an IndentationError): the
    kernel ran none of their code, so every name they define is missing, and each test that needs
    one says so plainly ("your cell `project_qkv` does not run: IndentationError at line 7")
    instead of a missing result. Found here, outside the kernel, from the submitted source."""

    def __init__(self, cells: Sequence[Any]):
        transform = TransformerManager().transform_cell  # %magics and !shell lines -> Python, as IPython runs them
        self.broken: list[tuple[str, str]] = []  # (the cell's source, what to say of it)
        for cell in cells:
            try:
                compile(transform(cell.source), "<cell>", "exec")
            except SyntaxError as error:  # IndentationError and TabError are SyntaxErrors
                self.broken.append((cell.source, self._said(cell, error)))
            except (ValueError, OverflowError):  # (a NUL byte, a literal too large) also stops the cell
                continue

    @staticmethod
    def _said(cell, error: SyntaxError) -> str:
        names = _defined(cell.source)
        label = names[0] if names else grade_id_of(cell) or "a cell"
        where = f" at line {error.lineno}" if error.lineno else ""
        return f"your cell `{label}` does not run: {type(error).__name__}{where}"

    def defining(self, name: str) -> str | None:
        """What to say of the broken cell that defines ``name`` (None: no broken cell does)."""
        return next((said for source, said in self.broken if name in _defined(source)), None)

    def all(self) -> dict[str, str]:
        """Every name a broken cell defines -> what to say of its cell."""
        return {name: said for source, said in self.broken for name in _defined(source)}


_DEFINES = re.compile(r"^(?:async\s+def|def|class)\s+([A-Za-z_]\w*)|^([A-Za-z_]\w*)\s*(?::[^=\n]*)?=(?!=)", re.M)


def _defined(source: str) -> list[str]:
    """The names a cell defines at its top level, read line by line (it does not parse)."""
    return list(dict.fromkeys(m[1] or m[2] for m in _DEFINES.finditer(source)))


class JudgedCheck:
    """What a declared check's name means while the grader re-runs a test cell: judge the
    cell's next record against the references built here, with the forbidden uses found in the
    student's source, quoting the kernel as ``quoting`` allows. The report goes to ``reports`` as
    data (in the kernel, the same check prints it or raises it)."""

    def __init__(self, check: registry.Check, replay: Replay, scanner: SourceScanner, quoting: Quoting,
                 reports: list[Report], memory_used: int | None = None, not_run: CellsThatDoNotRun | None = None,
                 seen: dict[str, bool] | None = None):
        self.check, self.replay, self.scanner, self.quoting, self.reports = check, replay, scanner, quoting, reports
        self.memory_used = memory_used  # the cell's, measured by the sandbox (None: not measured)
        self.not_run = not_run or CellsThatDoNotRun([])
        self.seen = {} if seen is None else seen  # graded name -> every test of it passed so far

    def __call__(self, student: Any, *, points: float, cases, device: Any = None) -> None:
        found = self.scanner.uses(student, self.check.forbidden_names) + self.scanner.outside_allowlist(student)
        record = self.replay.take(self.check.name)
        name = getattr(student, "name", None)
        report = judge_records(self.check, record, cases, points=points, found=found, quoting=self.quoting,
                               missing=self.not_run.defining(name) if isinstance(name, str) else None,
                               not_run=self.not_run.all(), seen=dict(self.seen))
        bounds = [self.check.spec(case).get(MEMORY_BOUND) for case in cases]
        if any(bounds):
            report = judge_memory(report, self.check.name, min(b for b in bounds if b), self.memory_used,
                                  self.quoting)
        self.reports.append(report)
        self.seen[self.check.name] = self.seen.get(self.check.name, True) and report.score >= report.points


MIB = 2**20


def judge_memory(report: Report, name: str, bound_mib: float, used: int | None, quoting: Quoting) -> Report:
    """A check whose cases must fit in ``bound_mib`` MiB, judged on the memory the test cell used
    as the sandbox measured it from outside the kernel (``used``, bytes: see
    autograder.sandbox.kernels.used_between): past the bound, the check earns nothing, however its
    values came out. Where the notebook ran without the grader's fork server (no sandbox, a cold kernel),
    nothing was measured: the values decide, and the report says so."""
    if used is None:
        return replace(report, text=report.text + f"\n    (not measured here: its memory limit of "
                       f"{bound_mib:g} MiB is checked where the grader runs notebooks in its sandbox)")
    if used <= bound_mib * MIB or report.score <= 0:  # (what already failed says why)
        return report
    return replace(report, score=0.0, text=(
        f"✗ {name}: while this test ran, your code used {float(quoting.magnitude(used / MIB)):g} MiB of memory, "
        f"measured from outside the notebook's kernel; its case fits in {bound_mib:g} MiB when computed block "
        f"by block (0 / {report.points:g} points)\n"
        "    hint: the whole (L, S) matrix of scores, or a copy of it in any form (numpy, another dtype, a buffer "
        "made beforehand, shared memory, a file), must never exist: keep one (block_size, block_size) tile of "
        "scores at a time, with a running maximum, sum and output per query"))


@functools.lru_cache(maxsize=512)
def _compiled_test(source: str) -> tuple[CodeType, CodeType | None]:
    """A test cell's code as IPython would run it, and its last expression apart. A test cell's
    source is the course's (restored from the source notebook), the same in every notebook of an
    assignment: it is compiled once per process."""
    tree = ast.parse(TransformerManager().transform_cell(source))
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    return (compile(tree, "<test cell>", "exec"),
            None if last is None else compile(ast.Expression(last.value), "<test cell>", "eval"))


def run_test_source(source: str, shared: dict) -> Any:
    """Run a test cell's code as IPython would; returns the value of its last expression."""
    body, last = _compiled_test(source)
    namespace = _CellNamespace(shared)
    exec(body, shared, namespace)  # noqa: S102 - the course's own test code
    return None if last is None else eval(last, shared, namespace)  # noqa: S307


class JudgeTests(NbGraderPreprocessor):
    """Judge each test cell on its records: the verdict (``CellVerdict``) goes into the cell's
    metadata as data, and the cell's outputs are replaced by that verdict as the feedback page
    shows it.

    From the first cell that holds hidden tests on (in the order the kernel ran the cells), the
    student's code may hold their source: a hook sees every cell compiled. From there the
    verdicts quote nothing the code chose freely (``Sealed``): what a case raised is its
    exception's type and the student's own line, a wrong result is its shape and how far it is
    off; the hints stay. Until there, the kernel has seen no hidden test, and its errors and
    values are quoted as the student's own notebook quotes them.

    The graded names whose cases failed without a ladder of the kernel's to localise the mistake
    go into the notebook's metadata (``UNLOCALISED``): the grader may run the notebook again,
    asking the kernel for their ladders (``engine.runner``). Each check is told which graded names
    the cells before it passed in full (``seen``): a hint whose cause depends on them says it."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.unlocalised: set[str] = set()
        self.seen: dict[str, bool] = {}  # graded name -> every test of it passed, in the cells judged so far

    def preprocess(self, nb, resources):
        self.unlocalised, self.seen = set(), {}
        student_sources = [c.source for c in nb.cells if is_student_cell(c)]
        scanner = SourceScanner(student_sources, [c.source for c in nb.cells
                                                  if c.get("cell_type") == "code" and not is_student_cell(c)])
        not_run = CellsThatDoNotRun([c for c in nb.cells if is_student_cell(c)])
        sealed = Sealed(line for source in student_sources for line in source.splitlines())
        quoting: Quoting = AS_IS
        for cell in nb.cells:
            cell.get("metadata", {}).pop(VERDICT, None)  # only the grader's own verdicts count
            if holds_hidden_tests(cell):
                quoting = sealed
            if is_test_cell(cell):
                verdict, cell.outputs = self.judge(cell, scanner, quoting, not_run)
                verdict.write(cell)
        nb.metadata.pop(UNLOCALISED, None)  # only the grader's own note counts
        if self.unlocalised:
            nb.metadata[UNLOCALISED] = sorted(self.unlocalised)
        return nb, resources

    def judge(self, cell, scanner: SourceScanner, quoting: Quoting,
              not_run: CellsThatDoNotRun | None = None) -> tuple[CellVerdict, list]:
        """The verdict on ``cell``, and the outputs that show it (``not_run``: the student's cells
        that do not compile)."""
        points = float(nbgrader_metadata(cell).get("points", 0))
        # what the executor observed in this cell (a timeout, a dead kernel), rebuilt from its own
        # note: an error output the kernel made, whatever its name, is not kept; the cell scores 0
        outputs = executor_error(observed(cell))
        stopped = bool(outputs)  # a cell the executor stopped (other notes, such as output cut, are no error)
        parts = [f"{o.ename}: {o.evalue}" for o in outputs]
        records = [o.data[MIME] for o in cell.outputs
                   if o.output_type == "display_data" and MIME in o.get("data", {})]
        printed, reports, replay = io.StringIO(), [], Replay(records)
        # the check names mean: judge the cell's next record (every other name is the student's)
        used = memory_used(cell)
        shared = {"__builtins__": builtins, **{name: JudgedCheck(check, replay, scanner, quoting, reports, used,
                                                                 not_run, self.seen)
                                               for name, check in registry.load_all().items()}}
        error = None  # (the error's name, its text)
        try:
            with contextlib.redirect_stdout(printed):
                run_test_source(cell.source, shared)
        except Exception as failure:  # noqa: BLE001 - the test could not be judged: no points
            why = failure if quoting is AS_IS else f"({type(failure).__name__})"
            error = (type(failure).__name__, f"this test could not be graded: {why}")
        if not replay.genuine:  # a record the genuine checks did not emit: forged
            printed, reports = io.StringIO(), []
            error = ("CheckFailed", "this test's recorded results were tampered with (a record that the test's own "
                     "checks did not emit, or one too many): 0 points for this test")
        if not error:
            self.unlocalised.update(r.unlocalised for r in reports if r.unlocalised)
        if printed.getvalue():
            outputs.append(new_output("stream", name="stdout", text=printed.getvalue()))
            parts.append(printed.getvalue())
        earned = min(sum(r.score for r in reports), points) if reports and not error else 0.0
        if reports and not error:
            # shown as the check shows it in the kernel: printed, with the partial credit as the
            # cell's result, or raised when it earns nothing
            report = "\n".join(r.text for r in reports)
            if earned <= 0:
                error = ("CheckFailed", report)
            else:
                outputs.append(new_output("stream", name="stdout", text=report + "\n"))
                parts.append(report)
        if error:
            ename, evalue = error
            outputs.append(new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"]))
            parts.append(evalue if ename == "CheckFailed" else f"{ename}: {evalue}")
        elif 0 < earned < points:
            credit = PartialCredit(earned, points)
            outputs.append(new_output("execute_result", data={"text/plain": repr(credit),
                                                              "text/html": credit._repr_html_()},
                                      execution_count=cell.get("execution_count")))
        score = 0.0 if stopped else earned  # a cell the executor stopped earns nothing
        return CellVerdict.composed(score, points, parts), outputs


class SaveVerdicts(SaveAutoGrades):
    """nbgrader's SaveAutoGrades, with a test cell's score taken from the grader's verdict in
    its metadata, never read back from its outputs (nbgrader's own rule still scores the
    other grade cells: a written answer left as released gets 0, any other waits for a person)."""

    def _add_score(self, cell, resources) -> None:
        if not is_test_cell(cell):
            return super()._add_score(cell, resources)
        verdict = CellVerdict.of(cell)
        grade = self.gradebook.find_grade(grade_id_of(cell), self.notebook_id, self.assignment_id, self.student_id)
        grade.auto_score = verdict.score if verdict else 0.0  # a test the grader did not judge earns nothing
        grade.needs_manual_grade = grade.manual_score is not None  # a person's score stands; they review it
        self.gradebook.db.commit()
