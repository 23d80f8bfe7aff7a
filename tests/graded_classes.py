"""Each assignment's corpus graded once per test session by the real CLI, for every test
module that judges it (tests/test_grading.py, tests/test_hints.py): like the built site
(classroom/site.py), a class is graded the first time a test asks for it and kept."""
from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from classroom import Results, grade, load_corpus, make_submission, notebook_name, tree_digest, written_answers

_graded: dict[str, "GradedClass"] = {}


class GradedClass:
    """A class of fake students for one assignment, graded once by the CLI: the reference
    solution, the release stub, every corpus student (tests/corpus/<assignment>/), a renamed
    notebook, a folder without a notebook and a truncated upload."""

    def __init__(self, assignment: str, tmp: Path):
        self.assignment = assignment
        self.root = tmp / "submitted"
        self.out = tmp / "results"
        self.corpus = load_corpus(assignment, cli=True)
        # the reference student answers the written questions in words of its own (graded by hand)
        self.written = {gid: f"My answer to {gid}: the scores grow with the width." for gid in written_answers(assignment)}
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
        self.digest_before = tree_digest(self.root)
        self.process = grade(self.root, self.out)
        assert self.process.returncode == 0, self.process.stderr
        self.results = Results.read(self.out)

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


def graded_class(assignment: str, tmp_path_factory: pytest.TempPathFactory) -> GradedClass:
    """The assignment's class, graded the first time it is asked for in this session."""
    if assignment not in _graded:
        _graded[assignment] = GradedClass(assignment, tmp_path_factory.mktemp(assignment))
    return _graded[assignment]
