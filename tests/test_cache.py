"""`python -m autograder grade --cache DIR`: a re-run grades only what changed, and gives the
results a fresh run would.

The CLI runs as an instructor runs it, from a snapshot of the grader (the autograder and
attention_checks packages and pyproject.toml, copied once per module): the cache keys on the
grader's files, so the snapshot keeps edits elsewhere in the working tree from changing them
mid-test, and a changed grader is simulated honestly by a second, edited snapshot.

What was graded is observed from outside the cache: the CLI runs through ``spy.py`` (below),
which wraps ``runner.grade_group`` (everything that grades one student's assignment: autograde,
feedback, and the status of a missing or invalid notebook) and logs each group it is called
with, in the CLI and in its worker processes.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from autograder.engine import cache
from autograder.options import GradingOptions
from autograder.results import NotebookResult, _from_json
from autograder.results import CellResult
import classroom
from classroom import REPO, Results, load_corpus, make_submission, notebook_name, tree_digest

pytestmark = pytest.mark.slow  # runs kernels, the CLI, a server or a browser

A1, A2 = "01-self-attention", "02-softmax-scaling"  # the cheapest two assignments

# Top level, not under __main__: multiprocessing's spawn runs this file again (as __mp_main__)
# in every worker process before it grades, so the workers' grade_group is wrapped too.
SPY = '''
import json, os, sys
from autograder import cli
from autograder.engine import runner

_grade_group = runner.grade_group

def grade_group(course, group):
    with open(os.environ["GRADED_LOG"], "a") as log:  # one short append per group: whole lines
        log.write(json.dumps([group[0].student_id, group[0].assignment]) + "\\n")
    return _grade_group(course, group)

runner.grade_group = grade_group

if __name__ == "__main__":
    sys.exit(cli.main(sys.argv[1:]))
'''


def snapshot_grader(dest: Path, origin: Path = REPO) -> Path:
    """A runnable copy of the grader in ``origin``, with the spy beside it."""
    classroom.snapshot_grader(dest, origin)
    (dest / "spy.py").write_text(SPY)
    return dest


@dataclass
class Run:
    out: Path
    graded: list[tuple[str, str]] = field(default_factory=list)  # (student, assignment) of each group graded


class Class:
    """Four students, two assignments, graded from ``grader`` with ``source`` into runs under ``tmp``."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.grader = snapshot_grader(tmp / "grader")
        self.source = tmp / "source"
        for assignment in (A1, A2):
            shutil.copytree(REPO / "solutions" / assignment, self.source / assignment)
        self.root, self.cache = tmp / "class", tmp / "cache"
        self.runs = 0
        for assignment in (A1, A2):
            make_submission(self.root, "reference", assignment)
            make_submission(self.root, "stub", assignment, answer_all=False)
            make_submission(self.root, "[odd] id é", assignment)  # ids travel as they are, entries by key
        corrupt = make_submission(self.root, "corrupt", A1)  # and no A2 folder: A2 is missing
        corrupt.write_text(corrupt.read_text()[:500])
        self.groups = {(student.name, a) for student in self.root.iterdir() for a in (A1, A2)}

    def run(self, *extra: str, root: Path | None = None, grader: Path | None = None, cache_dir: bool = True,
            exit_code: int = 0) -> Run:
        """The CLI through the spy: the results, and the groups it graded (``exit_code`` 1: a
        class in which no notebook could be graded, which the CLI reports and still writes)."""
        self.runs += 1
        out, log = self.tmp / f"out-{self.runs}", self.tmp / f"graded-{self.runs}.log"
        log.touch()
        command = [sys.executable, "spy.py", "grade", str(root or self.root), "--out", str(out), "--quiet",
                   "--source", str(self.source), *(["--cache", str(self.cache)] if cache_dir else []), *extra]
        process = subprocess.run(command, cwd=grader or self.grader, capture_output=True, text=True, timeout=1800,
                                 env=dict(os.environ, GRADED_LOG=str(log), PYTHONDONTWRITEBYTECODE="1"))
        assert process.returncode == exit_code, process.stderr
        return Run(out, [tuple(json.loads(line)) for line in log.read_text().splitlines()])

    def entry(self, student: str, assignment: str) -> Path:
        """The cache entry that holds a group (found by its content: entries are named by key)."""
        (path,) = [p for p in self.cache.glob("*/*.json")
                   if json.loads(p.read_text())["results"][0]["student_id"] == student
                   and json.loads(p.read_text())["results"][0]["assignment"] == assignment]
        return path


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class graded once with an empty cache, then again unchanged."""
    klass = Class(tmp_path_factory.mktemp("cache"))
    klass.first = klass.run()
    klass.again = klass.run()
    return klass


def test_first_run_grades_every_group_and_stores_it(graded):
    assert sorted(graded.first.graded) == sorted(graded.groups)  # the spy sees every group
    assert len(list(graded.cache.glob("*/*.json"))) == len(graded.groups)
    results = Results.read(graded.first.out)
    assert results.grades[("reference", A1)]["status"] == "ok"
    assert results.grades[("corrupt", A1)]["status"] == "invalid"
    assert results.grades[("corrupt", A2)]["status"] == "missing"


def test_an_unchanged_class_is_not_graded_again_and_gives_identical_files(graded):
    assert graded.again.graded == []
    before, after = tree_digest(graded.first.out), tree_digest(graded.again.out)
    assert "results.json" in after and "grades.csv" in after
    # a page per group (beside them, feedback/.mathjax/: the pages' MathJax, where it is installed)
    assert len([p for p in after if p.startswith("feedback/") and p.endswith(".html")]) == len(graded.groups)
    assert after == before


def test_changed_notebooks_and_source_are_graded_again_as_a_fresh_run_would(graded, tmp_path):
    """Two notebooks of A1 and A2's source notebook change, and two entries are damaged (one
    cut short, one of the wrong shape) beside the temporary file of a killed write: exactly those
    groups and every group of A2 are graded, and the results equal a run without the cache."""
    root = tmp_path / "class"
    shutil.copytree(graded.root, root)
    bug = next(e for e in load_corpus(A1) if e.expect == "partial")
    make_submission(root, "stub", A1)  # answered now
    make_submission(root, "[odd] id é", A1, bug.cells)
    source = graded.source / A2 / f"{notebook_name(A2)}.ipynb"
    original = source.read_bytes()
    notebook = json.loads(original)
    first_markdown = next(c for c in notebook["cells"] if c["cell_type"] == "markdown")
    first_markdown["source"] = "".join(first_markdown["source"]) + "\n\nOne more sentence from the instructor."
    cut, wrong = graded.entry("reference", A1), graded.entry("corrupt", A1)
    try:
        source.write_text(json.dumps(notebook, indent=1))
        cut.write_bytes(cut.read_bytes()[:100])
        wrong.write_text("[]")
        (cut.parent / ".half-written.tmp").write_text('{"key": ')
        cached = graded.run(root=root)
        fresh = graded.run(root=root, cache_dir=False)
        refreshed = graded.run(root=root)  # the regraded groups were stored, the damaged entries replaced
    finally:
        source.write_bytes(original)

    changed = {("stub", A1), ("[odd] id é", A1), ("reference", A1), ("corrupt", A1)}
    assert sorted(cached.graded) == sorted(changed | {g for g in graded.groups if g[1] == A2})
    assert tree_digest(cached.out) == tree_digest(fresh.out)
    assert refreshed.graded == [] and tree_digest(refreshed.out) == tree_digest(cached.out)
    # The changes mattered: the results are not the first run's.
    before, after = Results.read(graded.first.out), Results.read(cached.out)
    assert before.grades[("stub", A1)] != after.grades[("stub", A1)]
    assert before.grades[("[odd] id é", A1)]["score"] != after.grades[("[odd] id é", A1)]["score"]
    page = f"feedback/reference/{A2}/{notebook_name(A2)}.html"
    assert tree_digest(graded.first.out)[page] != tree_digest(cached.out)[page]


def edited_grader(graded, name: str, edit) -> Path:
    """The class's grader with one edit (a copy of its snapshot: nothing else differs)."""
    grader = snapshot_grader(graded.tmp / name, graded.grader)
    edit(grader)
    return grader


def bump_version(grader: Path) -> None:
    pyproject = grader / "pyproject.toml"
    text, bumped = re.subn(r'^version = "(.+)"$', r'version = "\1.post1"', pyproject.read_text(), count=1,
                           flags=re.M)
    assert bumped == 1
    pyproject.write_text(text)


def edit_check_comment(grader: Path) -> None:
    with open(grader / "attention_checks" / "self_attention.py", "a") as module:
        module.write("# a comment: any change to the checks' files is a new grader\n")


@pytest.mark.parametrize("change, edit, options, regraded", [
    ("nothing", None, [], False),
    ("another --jobs", None, ["--jobs", "1"], False),
    ("a new package version", bump_version, [], True),
    ("an edited file of the checks", edit_check_comment, [], True),
    ("another cell timeout", None, ["--cell-timeout", "61"], True),
])
def test_what_invalidates_the_cache(graded, tmp_path, change, edit, options, regraded):
    """One student whose notebook is refused (no kernel: cheap), entry present from the first run;
    nothing in that class could be graded, so the CLI exits 1 whether the result is cached or not."""
    root = tmp_path / "class"
    shutil.copytree(graded.root / "corrupt", root / "corrupt")
    grader = edited_grader(graded, tmp_path.name, edit) if edit else None
    run = graded.run(*options, root=root, grader=grader, exit_code=1)
    assert run.graded == ([("corrupt", A1)] if regraded else []), change
    assert Results.read(run.out).grades[("corrupt", A1)] == Results.read(graded.first.out).grades[("corrupt", A1)]


# In-process: what is stored, the JSON round trip, the fingerprint.

def result(status: str, student: str = "ann", notebook: str = "nb") -> NotebookResult:
    return NotebookResult(student, "01-x", notebook, status, 1.5, 3.0,
                          [CellResult("t1", 1.5, 2.0, False, "expected x\ngot y"), CellResult("t2", 0, 1, False, "")],
                          "a reason")


def test_results_round_trip_through_json_field_by_field():
    original = result("ok", student="[odd] \udcff id")
    assert NotebookResult.from_json(json.loads(json.dumps(original.to_json()))) == original

    @dataclass
    class Extended(NotebookResult):  # a field added later (hand-graded points) is carried too
        hand_points: float | None = None

    extended = Extended(**vars(result("ok")) | {"hand_points": 2.0})
    assert _from_json(Extended, json.loads(json.dumps(extended.to_json()))) == extended
    assert NotebookResult.from_json({k: v for k, v in original.to_json().items() if k != "reason"}).reason == ""
    with pytest.raises(ValueError):
        NotebookResult.from_json(original.to_json() | {"unknown": 1})


def store(folder: Path, graded) -> list[Path]:
    kept = cache.ResultCache(folder, SimpleNamespace(root=folder), GradingOptions(folder))
    kept._keys[("ann", "01-x")] = "ab" * 32  # as replay() leaves a group it did not find
    kept.store(graded)
    return list(folder.glob("*/*.json"))


def test_errors_are_not_stored_other_statuses_are(tmp_path):
    """A worker's crash says nothing of the notebook: the group is graded again next time."""
    assert store(tmp_path / "a", [(result("error"), None), (result("ok", notebook="nb2"), "<html/>")]) == []
    for status in ("ok", "timeout", "invalid", "missing"):
        assert len(store(tmp_path / status, [(result(status), "<html/>")])) == 1, status


def test_an_unwritable_cache_warns_and_grading_goes_on(tmp_path, capsys):
    (tmp_path / "ab").write_text("a file where the entry's folder goes")
    assert store(tmp_path, [(result("ok"), None)]) == []
    assert "cannot write to the cache" in capsys.readouterr().err


def test_the_grader_fingerprint_covers_every_file_but_bytecode(tmp_path):
    shutil.copytree(REPO / "attention_checks", tmp_path / "attention_checks",
                    ignore=shutil.ignore_patterns("__pycache__"))
    folders = [tmp_path / "attention_checks"]
    before = cache.code_fingerprint(folders)
    (tmp_path / "attention_checks" / "__pycache__").mkdir()
    (tmp_path / "attention_checks" / "__pycache__" / "core.cpython-311.pyc").write_bytes(b"\0")
    assert cache.code_fingerprint(folders) == before
    (tmp_path / "attention_checks" / "answers" / "hints.py").write_text("# changed\n", encoding="utf-8")
    assert cache.code_fingerprint(folders) != before
