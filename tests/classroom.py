"""Build classes of fake submissions from the release notebooks, and grade them.

A submission starts as the release notebook a student downloads; each solution
cell is then answered with the reference solution (from solutions/) unless the
test gives other code for it, keyed by the cell's nbgrader grade_id.
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
CORPUS = Path(__file__).resolve().parent / "corpus"


def _nbgrader(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def notebook_name(assignment: str) -> str:
    (path,) = sorted((REPO / "solutions" / assignment).glob("*.ipynb"))
    return path.stem


def reference_code(assignment: str) -> dict[str, str]:
    """grade_id -> source of each solution cell of the source notebook."""
    source = nbformat.read(REPO / "solutions" / assignment / f"{notebook_name(assignment)}.ipynb", 4)
    return {_nbgrader(c)["grade_id"]: c.source for c in source.cells if _nbgrader(c).get("solution")}


def secret_lines(assignment: str) -> set[str]:
    """Distinctive lines students must never see: reference solutions and hidden tests."""
    text = (REPO / "solutions" / assignment / f"{notebook_name(assignment)}.ipynb").read_text()
    source = "\n".join(c.source for c in nbformat.reads(text, 4).cells)
    regions = re.findall(r"BEGIN (SOLUTION|HIDDEN TESTS)(.*?)END \1", source, re.S)
    lines = {line.strip() for _, region in regions for line in region.splitlines()}
    return {line for line in lines if len(line) > 20 and not line.startswith("#")}


def make_submission(root: Path, student: str, assignment: str, code: dict[str, str] | None = None,
                    answer_all: bool = True) -> Path:
    """Write root/student/assignment/<notebook>.ipynb; returns its path.

    ``code`` replaces solution cells by grade_id; with ``answer_all`` the other
    solution cells get the reference solution, else they stay stubs.
    """
    name = notebook_name(assignment)
    notebook = nbformat.read(REPO / "exercises" / assignment / f"{name}.ipynb", 4)
    answers = dict(reference_code(assignment) if answer_all else {}, **(code or {}))
    unknown = set(code or {}) - set(reference_code(assignment))
    assert not unknown, f"no solution cells named {unknown} in {assignment}"
    for cell in notebook.cells:
        grade_id = _nbgrader(cell).get("grade_id")
        if _nbgrader(cell).get("solution") and grade_id in answers:
            cell.source = answers[grade_id]
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


def load_corpus(assignment: str) -> list[CorpusEntry]:
    entries = []
    for path in sorted((CORPUS / assignment).glob("*.py")):
        text = path.read_text()
        expect = re.search(r"^# expect: (full|partial)\s*$", text, re.M)
        assert expect, f"{path}: needs a '# expect: full|partial' line"
        hint = re.search(r"^# hint: (.+?)\s*$", text, re.M)
        chunks = re.split(r"^# %% cell: (\S+)\s*$", text, flags=re.M)
        cells = {chunks[i]: chunks[i + 1].strip("\n") + "\n" for i in range(1, len(chunks), 2)}
        assert cells, f"{path}: needs at least one '# %% cell: <grade_id>' section"
        entries.append(CorpusEntry(assignment, path.stem, expect.group(1), hint and hint.group(1), cells))
    return entries


def grade(submissions: Path, out: Path, *extra: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run the real command line, as an instructor would."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
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
