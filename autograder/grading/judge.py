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
import io
import re
from typing import Any, Sequence

import torch
from IPython.core.inputtransformer2 import TransformerManager
from nbformat.v4 import new_output
from nbgrader.preprocessors import NbGraderPreprocessor, SaveAutoGrades

from attention_checks import registry
from attention_checks.answers.judging import Report, judge_records
from attention_checks.core import PartialCredit
from attention_checks.record import MIME

from autograder.cells import (BEGIN_HIDDEN_TESTS, END_HIDDEN_TESTS, grade_id_of, is_student_cell, is_test_cell,
                              nbgrader_metadata)
from autograder.grading.scanner import SourceScanner, StudentObject
from autograder.results import VERDICT, CellVerdict, executor_error, observed


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


DTYPE_NAMES = {str(v).removeprefix("torch.") for v in vars(torch).values() if isinstance(v, torch.dtype)}


class HiddenText:
    """What the kernel may not say: the code of the notebook's hidden tests.

    Once a hidden test has been compiled, the student's code may hold its source (a hook sees
    every cell compiled) and put it in what it returns or raises. What the grader shows of a
    record is judged values and its own words, except a few texts taken from the kernel: an
    error's message and the line it raised at, a string the code returned, the name of an object's
    type, the names of inputs changed in place. Each of these is shown only if it holds no
    token of the hidden tests' code that the course's own cells do not show anyway (a number of
    three digits or more, a name with an underscore or a digit: seeds, sizes, their names), none of their lines, and no long run of letters and digits (base64, hex: encoded
    data); else it is replaced by a note."""

    REDACTED = "[not shown: it could carry the code of hidden tests]"
    ENCODED = re.compile(r"[A-Za-z0-9+/=]{24,}")
    TOKEN = re.compile(r"\w+")
    SECRET = re.compile(r"\d{3,}|[A-Za-z]\w*[_\d]\w*")  # seeds, sizes, names of the hidden code's own

    def __init__(self, cells):
        hidden, visible = [], []
        for cell in cells:
            if is_student_cell(cell):
                continue  # what the course shows, not what the student wrote (a cell of every number, say)
            inside = False
            for line in cell.source.splitlines():
                if BEGIN_HIDDEN_TESTS in line or END_HIDDEN_TESTS in line:
                    inside = BEGIN_HIDDEN_TESTS in line
                    continue
                (hidden if inside else visible).append(line)
        known = set(self.TOKEN.findall("\n".join(visible))) | DTYPE_NAMES
        code = re.sub(r"#.*", "", "\n".join(hidden))  # comments: words any message could hold
        self.tokens = {t for t in self.TOKEN.findall(code) if t not in known and self.SECRET.fullmatch(t)}
        self.lines = {line.strip() for line in hidden if len(line.strip()) >= 8}

    def shows(self, text: str) -> bool:
        return not (self.ENCODED.search(text) or any(line in text for line in self.lines)
                    or not self.tokens.isdisjoint(self.TOKEN.findall(text)))

    def clean(self, text: Any) -> Any:
        return text if not isinstance(text, str) or self.shows(text) else self.REDACTED

    def record(self, record: Any) -> Any:
        """``record`` with every text the kernel wrote that the grader may show checked."""
        if not isinstance(record, dict) or not isinstance(record.get("outcomes"), list):
            return record
        return {**record, "outcomes": [self._outcome(o) for o in record["outcomes"]]}

    def _outcome(self, outcome: Any) -> Any:
        if not isinstance(outcome, dict):
            return outcome
        cleaned = {key: self.clean(outcome.get(key)) for key in ("error", "meta_error") if key in outcome}
        if isinstance(outcome.get("modified"), list):
            cleaned["modified"] = [n for n in outcome["modified"] if isinstance(n, str) and self.shows(n)]
        if "value" in outcome:
            cleaned["value"] = self._value(outcome["value"])
        return {**outcome, **cleaned}

    def _value(self, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        if isinstance(value.get("plain"), str) and not self.shows(value["plain"]):
            return {"object": "str"}
        if "object" in value and not self.shows(str(value["object"])):
            return {"object": "object"}
        if isinstance(value.get("sequence"), list):
            return {**value, "sequence": [self._value(v) for v in value["sequence"]]}
        return value


class JudgedCheck:
    """What a declared check's name means while the grader re-runs a test cell: judge the
    cell's next record, its kernel texts checked against the hidden tests, against the
    references built here, with the forbidden uses found in the student's source. The report
    goes to ``reports`` as data (in the kernel, the same check prints it or raises it)."""

    def __init__(self, check: registry.Check, replay: Replay, scanner: SourceScanner, hidden: HiddenText,
                 reports: list[Report]):
        self.check, self.replay, self.scanner, self.hidden, self.reports = check, replay, scanner, hidden, reports

    def __call__(self, student: Any, *, points: float, cases, device: Any = None) -> None:
        found = self.scanner.uses(student, self.check.forbidden_names)
        record = self.hidden.record(self.replay.take(self.check.name))
        self.reports.append(judge_records(self.check, record, cases, points=points, found=found))


def run_test_source(source: str, shared: dict) -> Any:
    """Run a test cell's code as IPython would; returns the value of its last expression."""
    tree = ast.parse(TransformerManager().transform_cell(source))
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    namespace = _CellNamespace(shared)
    exec(compile(tree, "<test cell>", "exec"), shared, namespace)  # noqa: S102 - the course's own test code
    if last is None:
        return None
    return eval(compile(ast.Expression(last.value), "<test cell>", "eval"), shared, namespace)  # noqa: S307


class JudgeTests(NbGraderPreprocessor):
    """Judge each test cell on its records: the verdict (``CellVerdict``) goes into the cell's
    metadata as data, and the cell's outputs are replaced by that verdict as the feedback page
    shows it."""

    def preprocess(self, nb, resources):
        scanner = SourceScanner([c.source for c in nb.cells if is_student_cell(c)])
        hidden = HiddenText(nb.cells)
        for cell in nb.cells:
            cell.get("metadata", {}).pop(VERDICT, None)  # only the grader's own verdicts count
            if is_test_cell(cell):
                verdict, cell.outputs = self.judge(cell, scanner, hidden)
                verdict.write(cell)
        return nb, resources

    def judge(self, cell, scanner: SourceScanner, hidden: HiddenText) -> tuple[CellVerdict, list]:
        """The verdict on ``cell``, and the outputs that show it."""
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
        shared = {"__builtins__": builtins, **{name: JudgedCheck(check, replay, scanner, hidden, reports)
                                               for name, check in registry.load_all().items()}}
        error = None  # (the error's name, its text)
        try:
            with contextlib.redirect_stdout(printed):
                run_test_source(cell.source, shared)
        except Exception as failure:  # noqa: BLE001 - the test could not be judged: no points
            error = (type(failure).__name__, f"this test could not be graded: {failure}")
        if not replay.genuine:  # a record the genuine checks did not emit: forged
            printed, reports = io.StringIO(), []
            error = ("CheckFailed", "this test's recorded results were tampered with (a record that the test's own "
                     "checks did not emit, or one too many): 0 points for this test")
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
