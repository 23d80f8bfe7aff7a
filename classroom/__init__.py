"""What the tests and the benchmarks share: classes of fake students, built from the release
notebooks and the corpus (tests/corpus/), graded by the real command line; the package's
modules hold the rest (``notebook``: a source notebook's test cells run in-process; ``hints``:
the hint rule; ``site``: the book's build; ``service``: a submission service on a port;
``cluster``: a local Dask cluster).

A submission starts as the release notebook a student downloads; each solution
cell is then answered with the reference solution (from solutions/) unless the
test gives other code for it, keyed by the cell's nbgrader grade_id.
"""
from __future__ import annotations

import ast
import copy
import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.instructor.publish import HEADER

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "corpus"


def _nbgrader(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def notebook_name(assignment: str) -> str:
    (path,) = sorted((REPO / "solutions" / assignment).glob("*.ipynb"))
    return path.stem


def reference_code(assignment: str) -> dict[str, str]:
    """grade_id -> source of each solution cell of code in the source notebook (written answers,
    graded by hand, are ``written_answers``)."""
    return {gid: c.source for gid, c in _solution_cells(assignment).items() if c.cell_type == "code"}


def written_answers(assignment: str) -> dict[str, str]:
    """grade_id -> model answer of each written question (a markdown solution cell, graded by hand)."""
    return {gid: c.source for gid, c in _solution_cells(assignment).items() if c.cell_type == "markdown"}


def _solution_cells(assignment: str) -> dict:
    source = nbformat.read(REPO / "solutions" / assignment / f"{notebook_name(assignment)}.ipynb", 4)
    return {_nbgrader(c)["grade_id"]: c for c in source.cells if _nbgrader(c).get("solution")}


def secret_lines(assignment: str) -> set[str]:
    """Distinctive lines students must never see: reference solutions and hidden tests."""
    text = (REPO / "solutions" / assignment / f"{notebook_name(assignment)}.ipynb").read_text()
    source = "\n".join(c.source for c in nbformat.reads(text, 4).cells)
    regions = re.findall(r"BEGIN (SOLUTION|HIDDEN TESTS)(.*?)END \1", source, re.S)
    regions += [("WRITTEN", answer) for answer in written_answers(assignment).values()]  # whole cells
    lines = {line.strip() for _, region in regions for line in region.splitlines()}
    # a bare header (`for _ in range(max_len):`) says nothing of the answer: publish's scan skips it too
    return {line for line in lines if len(line) > 20 and not line.startswith("#") and not HEADER.match(line)}


def make_submission(root: Path, student: str, assignment: str, code: dict[str, str] | None = None,
                    answer_all: bool = True, added: list[tuple[str, str, str]] | None = None) -> Path:
    """Write root/student/assignment/<notebook>.ipynb; returns its path.

    ``code`` replaces solution cells by grade_id (a written answer's too); with ``answer_all``
    the other solution cells of code get the reference solution, else they stay stubs (a written
    answer stays "YOUR ANSWER HERE" unless ``code`` gives one). ``added`` holds cells the
    student inserted, each ``(anchor, kind, payload)`` placed after the cell with grade_id
    ``anchor`` (in order): kind "new" is a fresh cell of code ``payload`` (no nbgrader metadata,
    as Jupyter inserts it); kind "copy" is a copy and paste of the release cell with grade_id
    ``payload`` (same source and metadata, a new cell id).
    """
    name = notebook_name(assignment)
    notebook = nbformat.read(REPO / "exercises" / assignment / f"{name}.ipynb", 4)
    answers = dict(reference_code(assignment) if answer_all else {}, **(code or {}))
    unknown = set(code or {}) - set(_solution_cells(assignment))
    assert not unknown, f"no solution cells named {unknown} in {assignment}"
    for cell in notebook.cells:
        grade_id = _nbgrader(cell).get("grade_id")
        if _nbgrader(cell).get("solution") and grade_id in answers:
            cell.source = answers[grade_id]
    by_id = {_nbgrader(c).get("grade_id"): c for c in notebook.cells if _nbgrader(c).get("grade_id")}
    for anchor, kind, payload in reversed(added or []):  # reversed: each lands right after its anchor, in order
        assert anchor in by_id and (kind == "new" or payload in by_id), (assignment, anchor, payload)
        new = nbformat.v4.new_code_cell(payload) if kind == "new" else copy.deepcopy(by_id[payload])
        new.id = nbformat.v4.new_code_cell().id  # Jupyter gives a pasted cell a new id
        notebook.cells.insert(notebook.cells.index(by_id[anchor]) + 1, new)
    path = root / student / assignment / f"{name}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return path


@dataclass
class CorpusEntry:
    """A simulated student from tests/corpus/<assignment>/<name>.py."""

    assignment: str
    name: str
    expect: str  # "full" or "partial"
    hint: str | None
    cells: dict[str, str] = field(default_factory=dict)
    added: list[tuple[str, str, str]] = field(default_factory=list)  # see make_submission
    cli_only: bool = False  # "# cli only: <why>": only the real grader can judge it (see load_corpus)


# Sections of a corpus file: "# %% cell: <grade_id>" gives the code of that solution cell: the
# section's definitions stand in for the model solution's of the same names, the cell's other
# definitions stay (``completed_cell``), so a section holds only what the student wrote
# differently; "# %% new cell after: <grade_id>" inserts a cell of the student's own (a scratch
# cell) after that cell; "# %% copy of: <grade_id> after: <grade_id>" pastes a copy of a
# release cell (setup, test, ...) after another one (nothing below it).
SECTION = re.compile(r"^# %% (?:cell: (\S+)|new cell after: (\S+)|copy of: (\S+) after: (\S+))\s*$", re.M)


def load_corpus(assignment: str, cli: bool = False, corpus: Path | None = None) -> list[CorpusEntry]:
    """The simulated students of an assignment. Those marked "# cli only: <why>" (e.g. a call
    hidden from the in-kernel detector, which only the grader's source scan can catch) come
    only with ``cli``: an in-process harness would grade them as their code computes.
    ``corpus``: another folder laid out as tests/corpus (default CORPUS), e.g. tests/corpus_fresh."""
    entries, reference = [], reference_code(assignment)
    for path in sorted(((corpus or CORPUS) / assignment).glob("*.py")):
        text = path.read_text()
        expect = re.search(r"^# expect: (full|partial)\s*$", text, re.M)
        assert expect, f"{path}: needs a '# expect: full|partial' line"
        hint = re.search(r"^# hint: (.+?)\s*$", text, re.M)
        heads = list(SECTION.finditer(text))
        assert heads, f"{path}: needs at least one '# %% cell: <grade_id>' (or new cell, copy of) section"
        cli_only = re.search(r"^# cli only: \S", text, re.M) is not None
        if cli_only and not cli:
            continue
        entry = CorpusEntry(assignment, path.stem, expect.group(1), hint and hint.group(1), cli_only=cli_only)
        for head, after in zip(heads, heads[1:] + [None]):
            body = text[head.end():after.start() if after else len(text)].strip("\n") + "\n"
            solution, new_after, copied, copy_after = head.groups()
            if solution:
                entry.cells[solution] = completed_cell(reference.get(solution, ""), body)
            elif new_after:
                entry.added.append((new_after, "new", body))
            else:
                assert not body.strip(), f"{path}: a 'copy of' section holds no code"
                entry.added.append((copy_after, "copy", copied))
        entries.append(entry)
    return entries


def defined_names(statement: ast.stmt) -> set[str]:
    """The names a top-level statement of a cell binds: a function's, a class's, plain assignments'."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {statement.name}
    targets = statement.targets if isinstance(statement, ast.Assign) else (
        [statement.target] if isinstance(statement, ast.AnnAssign) else [])
    return {node.id for target in targets for node in ast.walk(target) if isinstance(node, ast.Name)}


def _first_line(statement: ast.stmt) -> int:
    return min([statement.lineno] + [d.lineno for d in getattr(statement, "decorator_list", [])])


def completed_cell(reference: str, section: str) -> str:
    """The solution cell a corpus section stands for. The section's code takes the place of the
    first of the reference's top-level statements that bind a name the section binds too, and
    those statements go; the reference's other lines stay as they are. A section that binds every
    name of the reference, or none of them, or that does not parse (a student's syntax error) is
    the whole cell, as written."""
    try:
        ours, theirs = ast.parse(reference).body, ast.parse(section).body
    except SyntaxError:
        return section
    redefined = set().union(*map(defined_names, theirs)) if theirs else set()
    replaced = [s for s in ours if defined_names(s) & redefined]
    if len(replaced) in (0, sum(1 for s in ours if defined_names(s))):
        return section
    lines = reference.splitlines(keepends=True)
    first, out, position = replaced[0], [], 0
    for statement in replaced:
        start, end = _first_line(statement) - 1, statement.end_lineno
        out += lines[position:start]
        if statement is first:
            out.append(section if section.endswith("\n") else section + "\n")
        position = end
    out += lines[position:]
    return "".join(out)


def reaches_past_the_allowlist(notebook: Path) -> bool:
    """Whether a submitted notebook's own cells use what no cell may (attention_checks.allowlist:
    an import outside its list, code given as text, a private name, ...), as the grader's source
    scan reads them: such a notebook earns nothing, whatever else its code does."""
    from autograder.cells import is_student_cell
    from autograder.grading.scanner import SourceScanner

    cells = [c for c in nbformat.read(notebook, 4).cells if c.cell_type == "code"]
    scanner = SourceScanner([c.source for c in cells if is_student_cell(c)],
                            [c.source for c in cells if not is_student_cell(c)])  # as JudgeTests reads them
    return scanner.outside_anywhere is not None


def grade(submissions: Path, out: Path, *extra: str, cwd: Path | None = None,
          env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the real command line, as an instructor would (``env``: variables to set)."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", **(env or {}))
    return subprocess.run([sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(out),
                           "--quiet", *extra], cwd=cwd or REPO, env=env, capture_output=True, text=True,
                          timeout=1800)


@dataclass
class Results:
    grades: dict[tuple[str, str], dict]  # (student, assignment) -> grades.csv row
    notebooks: dict[tuple[str, str], dict]  # (student, assignment) -> results.json entry (one notebook each)

    @classmethod
    def read(cls, out: Path) -> "Results":
        with open(out / "grades.csv", newline="") as f:
            grades = {(r["student_id"], r["assignment"]): r for r in csv.DictReader(f)}
        notebooks = {(r["student_id"], r["assignment"]): r for r in json.loads((out / "results.json").read_text())}
        return cls(grades, notebooks)


def tree_digest(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under root (to prove nothing changed)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def snapshot_grader(dest: Path, origin: Path = REPO) -> Path:
    """A copy of the grader in ``origin`` and its source notebooks, which ``python -m autograder``
    run from ``dest`` uses. The cache keys on both: re-runs from a copy measure the cache, not the
    edits made to a working tree meanwhile."""
    for folder in ("autograder", "attention_checks", "solutions"):
        shutil.copytree(origin / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(origin / "pyproject.toml", dest)
    return dest
