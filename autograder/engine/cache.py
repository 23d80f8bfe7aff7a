"""Incremental re-grading: ``grade ... --cache DIR`` grades only what changed since an earlier run.

A group (one student's assignment, the unit the runner grades) is looked up by a key, the
sha256 of everything its results depend on:

- the student's id, the assignment, and per expected notebook the submitted bytes (or why
  there are none: the missing or refused note discover() wrote, so a notebook that is still
  missing stays a hit and one that appears is a miss);
- every file of the assignment's source folder (as copied into the grading course);
- the grader: every file of the ``autograder`` and ``attention_checks`` packages, the
  package's version, and the versions of Python and of what runs the notebooks (torch,
  nbgrader, nbconvert, nbclient, ipykernel);
- the options that can change results: cell and notebook timeouts, memory, sandbox, warm
  kernels (not --jobs, nor which engine grades: they never change a result).

An entry, ``DIR/<key[:2]>/<key>.json``, holds the group's results (every field, the autograded
notebook too) and feedback pages as the report got them; it is named by the key, never by the student's id (which may hold any
character). It is written to a temporary file and renamed, so a killed run leaves whole
entries or none. An entry that cannot be read or does not fit its group is a miss: the
group is graded again and the entry replaced. Deleting DIR is always safe.

What is not stored: a group with a result of status ``error`` (a worker that crashed, the
kernel that died, nbgrader failing). Such a failure can come from the machine (a worker
killed, memory or disk short) rather than the notebook, so it is graded again on every run.
A ``timeout`` is stored: its limit is in the key, and regrading an endless loop on every run
would cost the most of all.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import sys
import tempfile
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import Iterable, Sequence

from autograder.engine.runner import Graded
from autograder.grading.course import Course
from autograder.grading.release import PYPROJECT, install_setting
from autograder.options import GradingOptions
from autograder.report import ResultsWriter
from autograder.results import NotebookResult
from autograder.submissions import Submission

# The code whose change may change a grade (the checks run in the kernel, judging in the grader).
# attention_checks is found, not imported: importing it loads PyTorch, which this process never
# needs (its workers do), and which costs a second or more of every `grade`'s start.
GRADER_PACKAGES = [Path(__file__).resolve().parents[1],  # autograder/
                   Path(importlib.util.find_spec("attention_checks").origin).resolve().parent]
# Third-party code that runs the notebooks or computes what they compute.
RUNTIME_PACKAGES = ["torch", "nbgrader", "nbconvert", "nbclient", "ipykernel"]
FORMAT = 1  # of an entry; bump when its layout changes


def grader_version() -> str:
    """The grader's release: pyproject.toml's tag in a clone (what a release bumps, even before
    a reinstall), else the installed package's version."""
    if PYPROJECT.is_file():
        return install_setting(PYPROJECT)[1]
    return metadata.version("attention-from-scratch")


def code_fingerprint(folders: Sequence[Path]) -> str:
    """sha256 over every file under ``folders`` (relative path and bytes; caches left out)."""
    digest = hashlib.sha256()
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                digest.update(f"{folder.name}/{path.relative_to(folder)}\0".encode("utf-8", "surrogateescape"))
                with open(path, "rb") as file:
                    digest.update(hashlib.file_digest(file, "sha256").digest())
    return digest.hexdigest()


def _runtime_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in RUNTIME_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


def _sha256_json(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode("utf-8", "surrogateescape")).hexdigest()


class ResultCache:
    """The entries of one run: what it looks up and what it stores, under ``folder``."""

    def __init__(self, folder: Path, course: Course, options: GradingOptions):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)  # an unusable DIR stops the run before any work
        self.course = course
        self.hits = 0
        self._keys: dict[tuple[str, str], str] = {}  # (real student id, assignment) -> key, of this run's groups
        self._grader = _sha256_json({"format": FORMAT, "version": grader_version(), "runtime": _runtime_versions(),
                                     "code": code_fingerprint(GRADER_PACKAGES),
                                     "options": options.affecting_results()})
        self._sources: dict[str, str] = {}
        self._write_failed = False

    def _source(self, assignment: str) -> str:
        """sha256 of the assignment's source files, as the course grades them."""
        if assignment not in self._sources:
            self._sources[assignment] = code_fingerprint([self.course.root / "source" / assignment])
        return self._sources[assignment]

    def key(self, group: Sequence[Submission]) -> str | None:
        """The group's key; None when a notebook cannot be read now (then it is graded, not stored)."""
        first = group[0]
        parts = [self._grader, self._source(first.assignment), first.student_id, first.assignment]
        for sub in group:
            parts += [sub.notebook, sub.path.name if sub.path else "", sub.note, sub.refused]
            if sub.path is not None and not sub.refused:
                try:  # O_NOFOLLOW, as load_notebook reads it: a link is never followed
                    with open(os.open(sub.path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as file:
                        parts.append(hashlib.file_digest(file, "sha256").hexdigest())
                except OSError:
                    return None
        return _sha256_json(parts)

    def _entry(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def replay(self, groups: Iterable[Sequence[Submission]], writer: ResultsWriter) -> list[list[Submission]]:
        """Give ``writer`` the results of every group found in the cache; returns the others."""
        misses = []
        for group in groups:
            key = self.key(group)
            graded = self._load(key, group) if key else None
            if graded is None:
                if key:
                    self._keys[(group[0].student_id, group[0].assignment)] = key
                misses.append(list(group))
                continue
            for result, feedback in graded:
                writer.add(result, feedback)
            self.hits += len(graded)
        return misses

    def _load(self, key: str, group: Sequence[Submission]) -> Graded | None:
        """The entry's results, or None when it is absent, unreadable or not this group's."""
        try:
            entry = json.loads(self._entry(key).read_text(encoding="utf-8"))
            if entry["key"] != key:
                return None
            graded = [(NotebookResult.from_json(r), f) for r, f in zip(entry["results"], entry["feedback"], strict=True)]
            expected = [(s.student_id, s.assignment, s.notebook) for s in group]
            if [(r.student_id, r.assignment, r.notebook) for r, _ in graded] != expected:
                return None
            if not all(f is None or isinstance(f, str) for _, f in graded):
                return None
            return graded
        except Exception:  # noqa: BLE001 - absent, truncated, or from another layout: grade again
            return None

    def store(self, graded: Graded) -> None:
        """Keep one group's results (those of a group that was looked up and not found)."""
        if not graded or any(result.status == "error" for result, _ in graded):
            return
        key = self._keys.pop((graded[0][0].student_id, graded[0][0].assignment), None)
        if key is None:
            return
        # asdict, not to_json: every field, also what the report writes elsewhere (the autograded notebook)
        entry = {"key": key, "results": [asdict(r) for r, _ in graded], "feedback": [f for _, f in graded]}
        path = self._entry(key)
        try:
            path.parent.mkdir(exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as file:
                    json.dump(entry, file)
                os.replace(tmp, path)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError as err:  # a full disk costs the next run time, never this run's results
            if not self._write_failed:
                print(f"autograder: warning: cannot write to the cache {self.folder}: {err}", file=sys.stderr)
            self._write_failed = True
