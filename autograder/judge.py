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
from typing import Any, Sequence

from IPython.core.inputtransformer2 import TransformerManager
from nbformat.v4 import new_output
from nbgrader.preprocessors import NbGraderPreprocessor

import attention_checks
from attention_checks.core import CheckFailed, PartialCredit
from attention_checks.record import MIME, Replay, replaying

# Errors the executor writes into a cell (not the student's): they stay in the outputs.
EXECUTOR_ERRORS = {"CellTimeoutError", "DeadKernelError"}
COURSE_CHECKS = "attention_checks"
TOUCHES_CHECKS = "the course's own checks (attention_checks) from its code"


def _nbgrader(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def is_test_cell(cell) -> bool:
    return cell.cell_type == "code" and _nbgrader(cell).get("grade") and not _nbgrader(cell).get("solution")


def is_student_cell(cell) -> bool:
    """A cell whose code the student wrote: a solution cell, or one they added."""
    return cell.cell_type == "code" and (_nbgrader(cell).get("solution") or not _nbgrader(cell).get("locked"))


class StudentObject:
    """Stands, in the grader's process, for a name the student's notebook defines."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"<the notebook's {self.name}>"


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
    """Every ``check_*`` function of the course's check modules, by name."""
    found = {}
    for info in pkgutil.iter_modules(attention_checks.__path__):
        module = importlib.import_module(f"{attention_checks.__name__}.{info.name}")
        found.update({name: getattr(module, name) for name in dir(module) if name.startswith("check_")})
    return found


class SourceScanner:
    """Finds uses of forbidden names in the student's code that a graded object can reach,
    and any use of the course's checks beyond importing its ``check_*`` functions (code
    that patches the recorder could forge outcomes, so it forfeits every check)."""

    def __init__(self, sources: Sequence[str]):
        self.defs: dict[str, list[ast.AST]] = {}
        self.statements: list[ast.stmt] = []  # module-level statements other than definitions
        self.touches_checks = False
        transform = TransformerManager().transform_cell  # %magics and !shell lines -> Python
        for source in sources:
            try:
                tree = ast.parse(transform(source))
            except (SyntaxError, ValueError):
                continue  # a cell that does not parse defines nothing
            self.touches_checks |= any(_touches_checks(node) for node in ast.walk(tree))
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    self.defs.setdefault(node.name, []).append(node)
                else:
                    self.statements.append(node)

    def uses(self, obj: Any, forbidden: Sequence[str]) -> list[str]:
        if not isinstance(obj, StudentObject):
            return []
        reachable = self._reachable(obj.name)
        attrs = {name.rsplit(".", 1)[-1]: name for name in forbidden}
        hits = [TOUCHES_CHECKS] if self.touches_checks else []
        for node in (n for root in reachable for n in ast.walk(root)):
            for word in _words(node):
                if word in attrs and not (word in self.defs and isinstance(node, ast.Name)):
                    hits.append(attrs[word])
        return list(dict.fromkeys(hits))

    def _reachable(self, name: str) -> list[ast.AST]:
        """The definitions of ``name``, what they use, and the statements binding those names."""
        seen, todo, nodes = set(), [name], []
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            found = list(self.defs.get(current, []))
            found += [s for s in self.statements if current in _bound_names(s)]
            nodes += found
            todo += [n.id for node in found for n in ast.walk(node) if isinstance(n, ast.Name)]
        return nodes


def _touches_checks(node: ast.AST) -> bool:
    """Mentions the course's checks other than to import its public names (``check_*``, ``pick_device``)."""
    if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == COURSE_CHECKS:
        public = set(attention_checks.__all__)
        return not all((alias.name.startswith("check_") or alias.name in public) and not alias.asname
                       for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        return False
    return COURSE_CHECKS in " ".join(_words(node))


def _bound_names(statement: ast.stmt) -> set[str]:
    names = set()
    for node in ast.walk(statement):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return names


def _words(node: ast.AST) -> list[str]:
    """The identifiers and strings a node mentions, where a forbidden name could hide."""
    if isinstance(node, ast.Attribute):
        # self.layer_norm is the student's own attribute, not F.layer_norm
        own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
        return [] if own else [node.attr]
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.alias):
        return node.name.split(".") + [node.asname or ""]
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    return []


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
        try:
            with replaying(Replay(records, scanner.uses)), contextlib.redirect_stdout(printed):
                result = run_test_source(cell.source, shared)
        except CheckFailed as failure:
            result, error = None, ("CheckFailed", str(failure))
        except Exception as failure:  # noqa: BLE001 - the test could not be judged: no points
            result, error = None, (type(failure).__name__, f"this test could not be graded: {failure}")
        else:
            error = None
        if printed.getvalue():
            outputs.append(new_output("stream", name="stdout", text=printed.getvalue()))
        if error:
            outputs.append(new_output("error", ename=error[0], evalue=error[1], traceback=[f"{error[0]}: {error[1]}"]))
        elif isinstance(result, PartialCredit):
            outputs.append(new_output("execute_result", data={"text/plain": repr(result),
                                                              "text/html": result._repr_html_()},
                                      execution_count=cell.get("execution_count")))
        return kept + outputs
