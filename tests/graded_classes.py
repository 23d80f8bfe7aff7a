"""Each assignment's corpus graded by the real CLI, once per test session, for every test that
judges it (tests/test_grading.py, tests/test_hints.py), through the ``graded`` fixture.

The classes a session's tests ask for are graded together, in one CLI run, the first time a test
asks for one: one start of the grader and one pool of workers instead of one per assignment,
each ending with a worker idle while the other finishes (conftest.py notes which classes the
collected tests ask for; a session that asks for one grades only that one). With several test
processes (`make test`), the first to ask grades them and the others read its results
(tests/once.py)."""
from __future__ import annotations

import hashlib
import html
import re
import shutil
from pathlib import Path

import pytest

from autograder.layout import find_assignments
from classroom import REPO, Results, grade, load_corpus, make_submission, notebook_name, tree_digest, written_answers
from once import Once, shared_folder

ASSIGNMENTS = find_assignments(REPO / "solutions")

_asked_for: set[str] = set()  # by the collected tests
_graded: dict[str, "GradedClass"] = {}


class GradedClass:
    """A class of fake students for one assignment: the reference solution, the release stub,
    every corpus student (tests/corpus/<assignment>/), a renamed notebook, a folder without a
    notebook and a truncated upload. ``root`` is the class alone (for tests that grade some of
    its students again); the CLI graded a copy of it, with the other classes asked for."""

    def __init__(self, assignment: str, tmp: Path):
        self.assignment = assignment
        self.root = tmp / "submitted"
        self.corpus = load_corpus(assignment, cli=True)
        # the reference student answers the written questions in words of its own (graded by hand)
        self.written = {gid: f"My answer to {gid}: the scores grow with the width." for gid in written_answers(assignment)}

    def submit(self) -> None:
        """Write every student's submission into ``root``."""
        assignment = self.assignment
        make_submission(self.root, "reference", assignment, self.written)
        make_submission(self.root, "stub", assignment, answer_all=False)
        for entry in self.corpus:
            make_submission(self.root, f"corpus-{entry.name}", assignment, entry.cells, added=entry.added)
        renamed = make_submission(self.root, "renamed", assignment)
        renamed.rename(renamed.with_name(f"{renamed.stem}-Copy1.ipynb"))
        (self.root / "no-notebook" / assignment).mkdir(parents=True)
        (self.root / "no-notebook" / assignment / "notes.txt").write_text("forgot to upload")
        corrupt = make_submission(self.root, "corrupt", assignment)
        corrupt.write_text(corrupt.read_text()[:500])  # a truncated upload

    def graded_by(self, submitted: Path, digest_before: dict[str, str], out: Path, results: Results) -> None:
        """Take this class's results from the run that graded ``submitted`` into ``out``."""
        self.submitted, self.digest_before, self.out = submitted, digest_before, out
        # (the run also gave this assignment a row "missing" for each student of the other classes)
        ours = {(student.name, self.assignment) for student in self.root.iterdir()}
        self.results = Results({key: row for key, row in results.grades.items() if key in ours},
                               {key: nb for key, nb in results.notebooks.items() if key in ours})

    def row(self, student: str) -> dict:
        return self.results.grades[(student, self.assignment)]

    def tests(self, student: str) -> list[dict]:
        return self.results.notebooks[(student, self.assignment)]["tests"]

    def failing_messages(self, student: str) -> list[str]:
        """The messages of the student's autograded tests that did not pass."""
        return [t["message"] for t in self.tests(student) if not t["manual"] and not t["passed"]]

    def feedback_text(self, student: str) -> str:
        """The feedback page as a reader sees it: tags removed, entities decoded."""
        page = (self.out / "feedback" / student / self.assignment / f"{notebook_name(self.assignment)}.html").read_text()
        return html.unescape(re.sub(r"<[^>]+>", "", page))


def asks_for(item: pytest.Item) -> str | None:
    """The class a test asks for: its ``graded`` parameter, an assignment (a module's own
    fixture of that name gives none, or something else)."""
    assignment = item.callspec.params.get("graded") if hasattr(item, "callspec") else None
    return assignment if assignment in ASSIGNMENTS else None


def ask_for(items: list[pytest.Item]) -> None:
    """Note the classes the session's tests ask for."""
    _asked_for.update(filter(None, map(asks_for, items)))


def graded_class(assignment: str, tmp_path_factory: pytest.TempPathFactory) -> GradedClass:
    """The assignment's class, graded, with every other class asked for, the first time one is."""
    if assignment not in _graded:
        _grade_together(sorted(_asked_for - set(_graded) | {assignment}), tmp_path_factory)
    return _graded[assignment]


def _grade_together(assignments: list[str], tmp_path_factory: pytest.TempPathFactory) -> None:
    """Grade the classes, or read them as graded by another of the session's test processes."""
    once = Once(shared_folder(tmp_path_factory), f"graded-{hashlib.sha256(' '.join(assignments).encode()).hexdigest()[:12]}")
    if once.claim():
        try:
            once.publish(_grade(assignments, tmp_path_factory))
        except BaseException as error:  # the processes waiting for these classes fail too, not wait
            once.fail(f"grading the classes {assignments} failed: {type(error).__name__}: {error}")
            raise
    for graded in once.value():
        _graded[graded.assignment] = graded


def _grade(assignments: list[str], tmp_path_factory: pytest.TempPathFactory) -> list[GradedClass]:
    tmp = tmp_path_factory.mktemp("graded-classes")
    classes = [GradedClass(assignment, tmp / assignment) for assignment in assignments]
    submitted, out = tmp / "submitted", tmp / "results"
    for graded in classes:  # SUBMISSIONS/<student>/<assignment>/, every class in one folder
        graded.submit()
        for student in graded.root.iterdir():
            shutil.copytree(student / graded.assignment, submitted / student.name / graded.assignment)
    digest_before = tree_digest(submitted)
    process = grade(submitted, out)
    assert process.returncode == 0, process.stderr
    results = Results.read(out)
    for graded in classes:
        graded.graded_by(submitted, digest_before, out, results)
    return classes


@pytest.fixture(scope="module", params=ASSIGNMENTS)
def graded(request, tmp_path_factory) -> GradedClass:
    """Each assignment's class in turn, or those a test names (``parametrize("graded", ...,
    indirect=True)``)."""
    return graded_class(request.param, tmp_path_factory)
