"""The in-process harness of test_attention_checks.py, for any assignment's source notebook.

``SourceNotebook("01-self-attention")`` reads solutions/<assignment>/<notebook>.ipynb and runs
its setup cell, its solution cells (or replacements) and its test cells in-process, each test
cell scored by nbgrader's own ``determine_grade`` through test_attention_checks.run_test_cell.
"""
from __future__ import annotations

import ast
import contextlib
import io
import re

import nbformat

from attention_checks.core import close
from classroom import REPO, load_corpus, notebook_name
from test_attention_checks import _nbgrader, _python, run_test_cell

__all__ = ["SourceNotebook", "free_names", "load_corpus"]


class SourceNotebook:
    def __init__(self, assignment: str):
        self.assignment = assignment
        self.path = REPO / "solutions" / assignment / f"{notebook_name(assignment)}.ipynb"
        self.nb = nbformat.read(self.path, as_version=4)
        self.cells = {_nbgrader(c)["grade_id"]: c for c in self.nb.cells}
        self.solutions = {gid: c.source for gid, c in self.cells.items() if _nbgrader(c).get("solution")}
        self.tests = {gid: c for gid, c in self.cells.items() if _nbgrader(c).get("grade")}
        self.max_score = sum(float(_nbgrader(c)["points"]) for c in self.tests.values())

    def points(self, grade_id: str) -> float:
        return float(_nbgrader(self.cells[grade_id])["points"])

    def hidden(self) -> list[str]:
        return [gid for gid, c in self.tests.items() if "### BEGIN HIDDEN TESTS" in c.source]

    def student(self, answers: dict[str, str] | None = None) -> dict:
        """The namespace of a kernel that ran the setup cell and the solution cells,
        each solution cell replaced by answers[grade_id] when given."""
        namespace: dict = {}
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(_python(self.cells["setup"].source), "<setup>", "exec"), namespace)
            for gid, source in self.solutions.items():
                exec(compile((answers or {}).get(gid, source), f"<{gid}>", "exec"), namespace)
        return namespace

    def grade_all(self, answers: dict[str, str] | None = None, namespace: dict | None = None
                  ) -> dict[str, tuple[float, str]]:
        namespace = namespace if namespace is not None else self.student(answers)
        return {gid: run_test_cell(cell, namespace) for gid, cell in self.tests.items()}

    def stubs(self) -> dict[str, str]:
        return {gid: re.sub(r"### BEGIN SOLUTION.*?### END SOLUTION", "raise NotImplementedError()", source,
                            flags=re.S) for gid, source in self.solutions.items()}

    def corpus_problem(self, entry) -> str | None:
        """Why a simulated student (tests/corpus) is not graded as its file declares, or None."""
        if not set(entry.cells) <= set(self.solutions):
            return f"{entry.name}: no solution cells {set(entry.cells) - set(self.solutions)}"
        results = self.grade_all(entry.cells)
        total = sum(points for points, _ in results.values())
        messages = "\n".join(message for _, message in results.values())
        if entry.expect == "full":
            return None if total == self.max_score else f"{entry.name}: {total}/{self.max_score}\n{messages}"
        if not 0 < total < self.max_score:
            return f"{entry.name}: {total}/{self.max_score}, expected partial credit\n{messages}"
        return None if entry.hint.lower() in messages.lower() else f"{entry.name}: no {entry.hint!r} in\n{messages}"

    def uncaught_mistakes(self, function: str, make_case, device) -> set[str]:
        """Known mistakes of ``function`` that no visible case tells from the reference
        (they could never be diagnosed)."""
        seen, caught = set(), set()
        for gid, cell in self.tests.items():
            if gid in self.hidden() or f"check_{function}(" not in cell.source:
                continue
            for spec in self.cases(gid):
                case = make_case(spec, device)
                for name, mistake in case.mistakes().items():
                    seen.add(name)
                    if any(out is not None and not close(out, case.expected[key], case.like.dtype, equal_nan=True)
                           for key, out in mistake.outputs.items()):
                        caught.add(name)
        return seen - caught

    def cases(self, grade_id: str) -> list[dict]:
        """The literal case dicts of a test cell (its `cases=` argument, or the list it names)."""
        tree = ast.parse(self.cells[grade_id].source)
        bound = {t.id: node.value for node in tree.body if isinstance(node, ast.Assign) for t in node.targets}
        call = tree.body[-1].value
        (arg,) = [kw.value for kw in call.keywords if kw.arg == "cases"]
        if isinstance(arg, ast.Name):
            arg = bound[arg.id]
        return [ast.literal_eval(_dict_call_to_literal(e)) for e in arg.elts]


def _dict_call_to_literal(node: ast.expr) -> ast.expr:
    """dict(a=1) -> {'a': 1}, so that ast.literal_eval reads it."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        return ast.Dict([ast.Constant(kw.arg) for kw in node.keywords], [kw.value for kw in node.keywords])
    return node


def free_names(source: str) -> set[str]:
    """Names a test cell reads that it does not bind itself."""
    tree = ast.parse(source)
    bound = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign) for t in node.targets
             if isinstance(t, ast.Name)}
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return used - bound
