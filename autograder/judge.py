"""The grader's verdict on every test cell, computed outside the student's kernel.

In the kernel, each check records what the student's code returned (see
``attention_checks.record``); what it printed or raised there is only for the
student. ``JudgeTests`` replaces the outputs of each test cell by running the test
cell's own source (restored from the source notebook) in the grader's process, where
the checks rebuild their cases, compute the references and judge the recorded
outcomes. Monkeypatching the checks, torch or the verdict inside the kernel changes
nothing here. The grader also reads the student's source for forbidden calls, since a
kernel could hide them from the in-kernel detector.
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import importlib
import io
import pkgutil
from typing import Any

from IPython.core.inputtransformer2 import TransformerManager
from nbformat.v4 import new_output
from nbgrader.preprocessors import NbGraderPreprocessor

import attention_checks
from attention_checks.core import CheckFailed, PartialCredit
from attention_checks import registry
from attention_checks.answers.judging import judge_records
from attention_checks.record import MIME, Replay, replaying

from .scanner import SourceScanner, StudentObject

# Errors the executor writes into a cell (not the student's): they stay in the outputs.
EXECUTOR_ERRORS = {"CellTimeoutError", "DeadKernelError"}


def _nbgrader(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def is_test_cell(cell) -> bool:
    return cell.cell_type == "code" and _nbgrader(cell).get("grade") and not _nbgrader(cell).get("solution")


def is_student_cell(cell) -> bool:
    """A cell whose code the student wrote: a solution cell, or one they added."""
    return cell.cell_type == "code" and (_nbgrader(cell).get("solution") or not _nbgrader(cell).get("locked"))


class _CellNamespace(dict):
    """Local names of a replayed test cell: unknown names are the student's objects."""

    def __init__(self, shared: dict):
        super().__init__()
        self.shared = shared

    def __missing__(self, name: str):
        if name in self.shared or hasattr(builtins, name):
            raise KeyError(name)  # found in the globals or the builtins instead
        return StudentObject(name)


def check_functions() -> dict[str, Any]:
    """Every ``check_*`` function of the course's check modules, by name (declared checks
    and the functions of modules not yet declared in the registry)."""
    found = {}
    for info in pkgutil.iter_modules(attention_checks.__path__):
        if info.name == "answers":
            continue
        module = importlib.import_module(f"{attention_checks.__name__}.{info.name}")
        found.update({name: getattr(module, name) for name in dir(module) if name.startswith("check_")})
    found.update(registry.load_all())
    return found


class JudgedCheck:
    """What a declared check's name means while the grader re-runs a test cell: judge the
    cell's next record against the references built here, with the forbidden uses found in
    the student's source."""

    def __init__(self, check: registry.Check, replay: Replay):
        self.check, self.replay = check, replay

    def __call__(self, student: Any, *, points: float, cases, device: Any = None):
        __tracebackhide__ = True
        found = self.replay.forbidden_uses(student, sorted(set(self.check.forbidden.values())))
        record = self.replay.take(self.check.name)
        return judge_records(self.check, record, cases, points=points, found=found).deliver()


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
    """Replace each test cell's outputs by the grader's own verdict on its records."""

    def preprocess(self, nb, resources):
        scanner = SourceScanner([c.source for c in nb.cells if is_student_cell(c)])
        shared = {"__builtins__": builtins, **check_functions()}
        for cell in nb.cells:
            if is_test_cell(cell):
                cell.outputs = self.judge(cell, dict(shared), scanner)
        return nb, resources

    def judge(self, cell, shared: dict, scanner: SourceScanner) -> list:
        kept = [o for o in cell.outputs if o.output_type == "error" and o.get("ename") in EXECUTOR_ERRORS]
        records = [o.data[MIME] for o in cell.outputs
                   if o.output_type == "display_data" and MIME in o.get("data", {})]
        printed, outputs = io.StringIO(), []
        replay = Replay(records, scanner.uses)
        shared.update({name: JudgedCheck(check, replay) for name, check in shared.items()
                       if isinstance(check, registry.Check)})
        try:
            with replaying(replay), contextlib.redirect_stdout(printed):
                result = run_test_source(cell.source, shared)
        except CheckFailed as failure:
            result, error = None, ("CheckFailed", str(failure))
        except Exception as failure:  # noqa: BLE001 - the test could not be judged: no points
            result, error = None, (type(failure).__name__, f"this test could not be graded: {failure}")
        else:
            error = None
        if not replay.genuine:  # a record the genuine checks did not emit: forged
            printed, result = io.StringIO(), None
            error = ("CheckFailed", "this test's recorded results were tampered with (a record that the test's "
                     "own checks did not emit, or one too many): 0 points for this test")
        if printed.getvalue():
            outputs.append(new_output("stream", name="stdout", text=printed.getvalue()))
        if error:
            outputs.append(new_output("error", ename=error[0], evalue=error[1], traceback=[f"{error[0]}: {error[1]}"]))
        elif isinstance(result, PartialCredit):
            outputs.append(new_output("execute_result", data={"text/plain": repr(result),
                                                              "text/html": result._repr_html_()},
                                      execution_count=cell.get("execution_count")))
        return kept + outputs
