"""The data folder: the database (SQLite by default), each submission's notebook, and what
grading made of it. Files are named by submission number only (never by anything a student
sent), and every path is checked to lie inside the folder before it is read or written::

    DATA/service.db                  the default database
    DATA/notebooks/<id>.ipynb        as submitted
    DATA/feedback/<id>.html          the feedback page the grader wrote (hidden tests' code never in it)
    DATA/autograded/<id>.ipynb       the graded notebook (instructors only: formgrader reads these)
    DATA/work/                       the prepared course and the workers' copies (emptied at each start)
    DATA/service.lock                held by the running service: one service per data folder
    DATA/.health-probe, DATA/*/.health-probe   written and removed by /health's check, every second

The folder is its owner's only (0700: students' notebooks, their results and the tokens'
hashes), and each file the service writes is 0600.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

from autograder.results import NotebookResult


RESULT_FOLDERS = ("notebooks", "feedback", "autograded")  # where uploads and graded results are written


class DataFolderInUse(RuntimeError):
    pass


def private_folder(root: Path) -> Path:
    """``root``, made if missing, readable by its owner only (0700; a folder from an earlier
    version, world-readable, is closed too, and its database file made 0600)."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(root, 0o700)
    for database in root.glob("service.db*"):  # SQLite's file and its WAL, made with the umask's mode
        os.chmod(database, 0o600)
    return root.resolve()


class Storage:
    def __init__(self, root: Path):
        self.root = private_folder(root)
        for folder in (*RESULT_FOLDERS, "work"):
            (self.root / folder).mkdir(mode=0o700, exist_ok=True)
        self._lock = None

    def lock(self) -> None:
        """Hold the data folder for this process until it ends: a second service on the same folder
        would empty the first one's work folder and grade its queue twice over."""
        handle = open(self.root / "service.lock", "a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            handle.close()
            raise DataFolderInUse(f"another service (process {holder}) is using the data folder {self.root}: "
                                  "stop it first, or give this one a --data folder of its own") from None
        handle.truncate(0)
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._lock = handle

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

    def read_notebook(self, submission_id: int) -> bytes:
        """The notebook as stored: an OSError here is the service's storage failing (a folder
        unreadable for a moment, a notebook another data folder holds), never the student's."""
        return self.notebook(submission_id).read_bytes()

    def explain(self, err: OSError) -> str:
        """An OSError in words a student or ``/health`` may read: what failed, and the file within
        the data folder (``DATA/...``), never the server's own path."""
        what = err.strerror or self.public(str(err))
        where = self.public(err.filename) if isinstance(err.filename, str) else ""
        return f"{what}: {where}" if where.startswith("DATA") else what

    def public(self, text: str) -> str:
        """``text`` with the data folder's path said as ``DATA``."""
        return text.replace(str(self.root), "DATA")

    def unwritable(self, room: int) -> list[str]:
        """Why an upload or a graded result could not be stored now (each folder written to: a small
        file written, flushed and removed; at least ``room`` bytes free): [] while it could."""
        found = []
        for label, folder in (("DATA", self.root), *((f"DATA/{name}", self.root / name) for name in RESULT_FOLDERS)):
            probe = folder / ".health-probe"
            try:
                _write_atomically(probe, b"\0" * 4096)
                probe.unlink()
                space = os.statvfs(folder)
            except OSError as err:  # a full disk's ENOSPC names no file: the folder is named here
                found.append(f"the data folder cannot be written: {label}: {err.strerror or err}")
                continue
            free = space.f_bavail * space.f_frsize
            if free < room:
                found.append(f"the data folder is full: {label} has {free / 1024**2:.1f} MB free, less than an upload "
                             f"may need ({room / 1024**2:.1f} MB)")
        return found

    def without_feedback(self) -> set[int]:
        """Submissions with a graded notebook but no feedback page (a page lost, or a result stored
        by an earlier version that did not insist on one)."""
        def numbers(folder: str, suffix: str) -> set[int]:
            return {int(p.name.removesuffix(suffix)) for p in (self.root / folder).glob(f"*{suffix}")
                    if p.name.removesuffix(suffix).isdigit()}
        return numbers("autograded", ".ipynb") - numbers("feedback", ".html")

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
    """Whole or not at all (a full disk leaves the old file, or none, and no partial one), 0600."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        descriptor = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(descriptor, "wb") as file:
            file.write(data)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
