"""The in-process harness of the checks' tests, for any assignment's source notebook.

``SourceNotebook("01-self-attention")`` reads solutions/<assignment>/<notebook>.ipynb and runs
its setup cell, its solution cells (or replacements) and its test cells in-process, each test
cell scored by nbgrader's own ``determine_grade`` on the outputs a kernel would record
(``run_test_cell``), so the tests follow the notebook rather than a copy of it.
"""
from __future__ import annotations

import ast
import contextlib
import io
import linecache
import re
import warnings

import nbformat
import torch
from nbformat.v4 import new_output

from attention_checks import CheckFailed
from classroom import REPO, load_corpus, notebook_name

__all__ = ["SourceNotebook", "free_names", "load_corpus", "run_test_cell", "tf32"]


def _nbgrader(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def _python(source: str) -> str:
    """A cell's source as IPython runs it (the setup cell holds a %pip line)."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


CPU = torch.device("cpu")

def check_report(check, fn, cases, points: float = 1, device: torch.device = CPU) -> tuple[float, str]:
    """What a check says of ``fn`` in a student's notebook: the points it gives (all of them when it
    returns nothing, 0 when it raises CheckFailed) and its report, printed or raised."""
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            score = check(fn, points=points, cases=cases, device=device)
        except CheckFailed as failed:
            return 0.0, str(failed)
    return (points if score is None else float(score)), out.getvalue()


def run_test_cell(cell, namespace: dict) -> tuple[float, str]:
    """Run a test cell as a kernel would, and grade its outputs as nbgrader does.
    Returns (points, everything it printed or raised)."""
    from IPython.core.formatters import PlainTextFormatter
    from nbgrader.utils import determine_grade

    tree = ast.parse(cell.source)
    assert isinstance(tree.body[-1], ast.Expr), "a check must be the last expression of its cell"
    body = ast.Module(tree.body[:-1], type_ignores=[])
    last = ast.Expression(tree.body[-1].value)
    stdout, stderr, outputs = io.StringIO(), io.StringIO(), []
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), warnings.catch_warnings(
        record=True
    ) as caught:
        warnings.simplefilter("always")
        try:
            exec(compile(body, "<test>", "exec"), namespace)
            value = eval(compile(last, "<test>", "eval"), namespace)
            error = None
        except CheckFailed as failed:
            value, error = None, failed
    err_text = stderr.getvalue() + "".join(f"{w.category.__name__}: {w.message}\n" for w in caught)
    if stdout.getvalue():
        outputs.append(new_output("stream", name="stdout", text=stdout.getvalue()))
    if err_text:  # what a kernel would show on stderr: nbgrader then gives 0
        outputs.append(new_output("stream", name="stderr", text=err_text))
    if error is not None:
        outputs.append(new_output("error", ename=type(error).__name__, evalue=str(error), traceback=[]))
    elif value is not None:
        outputs.append(new_output("execute_result", data={"text/plain": PlainTextFormatter()(value)}, execution_count=1))
    graded = nbformat.from_dict(dict(cell, outputs=outputs))
    points, max_points = determine_grade(graded)
    assert max_points == float(_nbgrader(cell)["points"])
    message = stdout.getvalue() + err_text + (str(error) if error else "")
    return points, message


def tf32(x: torch.Tensor) -> torch.Tensor:
    """Round float32 to TF32 (10-bit mantissa), as a GPU's tensor cores do before a matmul."""
    bits = x.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)





class SourceNotebook:
    def __init__(self, assignment: str):
        self.assignment = assignment
        self.path = REPO / "solutions" / assignment / f"{notebook_name(assignment)}.ipynb"
        self.nb = nbformat.read(self.path, as_version=4)
        self.cells = {_nbgrader(c)["grade_id"]: c for c in self.nb.cells}
        # code to write and its autograded tests; a written answer (a markdown cell that is both a
        # solution and a grade cell) is graded by hand, neither run nor autograded
        self.solutions = {gid: c.source for gid, c in self.cells.items()
                          if _nbgrader(c).get("solution") and c.cell_type == "code"}
        self.tests = {gid: c for gid, c in self.cells.items()
                      if _nbgrader(c).get("grade") and not _nbgrader(c).get("solution")}
        self.written = {gid: c for gid, c in self.cells.items()
                        if _nbgrader(c).get("grade") and _nbgrader(c).get("solution")}
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
                _run_cell((answers or {}).get(gid, source), f"<{gid}>", namespace)
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

    def uncaught_mistakes(self, check, make_case=None, device=None) -> set[str]:
        """Known mistakes of a declared check that no visible case tells from the reference
        (they could never be diagnosed). (A function name with its old case builder is still
        accepted for modules not yet declared in the registry.)"""
        from attention_checks.answers.judging import answer_for, close, judged

        seen, caught = set(), set()
        name = check.function_name if make_case is None else f"check_{check}"
        for gid, cell in self.tests.items():
            if gid in self.hidden() or f"{name}(" not in cell.source:
                continue
            for spec in self.cases(gid):
                if make_case is None:
                    case = judged(check, spec)
                    mistakes = answer_for(check).mistakes(case.x, case.spec, case.expected)
                    expected, dtype = case.expected, case.dtype
                else:
                    case = make_case(spec, device)
                    mistakes, expected, dtype = case.mistakes(), case.expected, case.like.dtype
                for mistake_name, mistake in mistakes.items():
                    if getattr(mistake, "fits", None) is not None:  # a test on the outputs: none to compare
                        continue
                    seen.add(mistake_name)
                    if any(out is not None and not close(out, expected[key], dtype, equal_nan=True)
                           for key, out in mistake.outputs.items()):
                        caught.add(mistake_name)
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


def _corpus(path) -> tuple[str, str | None, dict[str, str]]:
    """(expect, hint, cells) of one corpus file, for the per-assignment tests not yet on SourceNotebook."""
    entry = next(e for e in load_corpus(path.parent.name, cli=True) if e.name == path.stem)
    return entry.expect, entry.hint, entry.cells


def _run_cell(source: str, filename: str, namespace: dict) -> None:
    """A cell run as a kernel runs it: its lines can be read back by name (linecache), as a traceback
    or the localising call recorder reads the lines of an IPython cell."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
