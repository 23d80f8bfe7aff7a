"""The data folder: the database (SQLite by default), each submission's notebook, and what
grading made of it. Files are named by submission number only (never by anything a student
sent), and every path is checked to lie inside the folder before it is read or written::

    DATA/service.db                  the default database
    DATA/notebooks/<id>.ipynb        as submitted
    DATA/feedback/<id>.html          the feedback page the grader wrote (hidden tests' code never in it)
    DATA/autograded/<id>.ipynb       the graded notebook (instructors only: formgrader reads these)
    DATA/work/                       the prepared course and the workers' copies (emptied at each start)
"""
from __future__ import annotations

import os
from pathlib import Path

from autograder.results import NotebookResult


class Storage:
    def __init__(self, root: Path):
        self.root = root.resolve()
        for folder in ("notebooks", "feedback", "autograded", "work"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)

    def _path(self, folder: str, submission_id: int, suffix: str) -> Path:
        path = (self.root / folder / f"{int(submission_id)}{suffix}").resolve()
        if not path.is_relative_to(self.root):
            raise PermissionError(f"{path} is outside the data folder")
        return path

    def notebook(self, submission_id: int) -> Path:
        return self._path("notebooks", submission_id, ".ipynb")

    def feedback(self, submission_id: int) -> Path:
        return self._path("feedback", submission_id, ".html")

    def autograded(self, submission_id: int) -> Path:
        return self._path("autograded", submission_id, ".ipynb")

    def save_notebook(self, submission_id: int, data: bytes) -> None:
        _write_atomically(self.notebook(submission_id), data)

    def write_result(self, submission_id: int, result: NotebookResult, page: str | None) -> None:
        """The feedback page (none where nbgrader could not grade the notebook: its status and
        reason say why) and the graded notebook."""
        if page is not None:
            _write_atomically(self.feedback(submission_id), page.encode())
        if result.autograded:
            _write_atomically(self.autograded(submission_id), result.autograded.encode())

    def work(self) -> Path:
        return self.root / "work"


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
