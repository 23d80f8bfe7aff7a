"""Generated courses kept between runs: ``grade`` prepares a class's assignments once.

nbgrader's ``generate_assignment`` fills the gradebook with the assignments' cells and writes
their release notebooks: a third of a second for one assignment, part of every ``grade``'s fixed
start. Its result depends only on the assignments' source folders, nbgrader and this grader's
configuration of it. So a course generated once is kept, under a key made of those (files'
names and bytes, nbgrader's version, this module's and course.py's code), and a later run with
the same key starts from a copy of it, as a grading worker starts from the CLI's course.

The courses hold the source notebooks, hidden tests included: they are kept in the
instructor's own cache folder (``AUTOGRADER_COURSE_CACHE``, default
``~/.cache/attention-autograder/courses``), readable by the instructor alone. ``off`` keeps none.
Only the last ``KEPT`` courses stay. A cache that cannot be written costs a generation, nothing else.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from fnmatch import fnmatch
from pathlib import Path
from typing import Callable

import nbgrader

from autograder.grading import course as course_module
from autograder.grading.course import IGNORED, NOT_COPIED, Course
from autograder.options import GradingOptions

KEPT = 8  # courses kept: a term's assignments, one at a time or all together
VARIABLE = "AUTOGRADER_COURSE_CACHE"


def cache_folder() -> Path | None:
    """Where generated courses are kept, or None (``AUTOGRADER_COURSE_CACHE=off``)."""
    chosen = os.environ.get(VARIABLE, "")
    if chosen == "off":
        return None
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "attention-autograder" / "courses"


def course_key(source_dir: Path, assignments: list[str]) -> str:
    """What a generated course depends on: the assignments' source files (names and bytes),
    nbgrader's version and the grader's code that configures it."""
    digest = hashlib.sha256()
    for code in (nbgrader.__version__, Path(course_module.__file__).read_bytes(), Path(__file__).read_bytes()):
        digest.update(code if isinstance(code, bytes) else code.encode())
    for assignment in sorted(assignments):
        folder = Path(source_dir) / assignment
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            relative = path.relative_to(source_dir)
            if any(fnmatch(part, pattern) for part in relative.parts for pattern in IGNORED):
                continue  # what the course's copy of the source leaves out
            digest.update(str(relative).encode("utf-8", "surrogateescape") + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:32]


def prepared_course(root: Path, options: GradingOptions, assignments: list[str],
                    progress: Callable[[str], None] = lambda line: None) -> Course:
    """The course of ``assignments`` at ``root``, generated (and kept) or copied from the cache;
    ``progress`` is told which, in a line."""
    folder = cache_folder()
    key = course_key(options.source_dir, assignments) if folder else ""
    kept = folder / key if folder else None
    if kept is not None and (kept / "gradebook.db").is_file():
        try:
            course = Course(root, options, copy_of=kept)
        except (OSError, shutil.Error):  # removed meanwhile by another grader keeping newer ones
            shutil.rmtree(root, ignore_errors=True)
        else:
            _touch(kept)
            progress(f"prepared {', '.join(assignments)} (generated before, kept in {folder})")
            return course
    course = Course(root, options, assignments=assignments)
    course.generate_all(lambda a: progress(f"preparing {a} (nbgrader generate_assignment)"))
    if kept is not None:
        _keep(course.root, kept)
    return course


def _keep(generated: Path, kept: Path) -> None:
    """Copy a freshly generated course into the cache, whole or not at all (another grader may
    be keeping the same course at the same time: the first to finish wins)."""
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.parent.chmod(0o700)  # hidden tests: the instructor's alone
        staging = Path(tempfile.mkdtemp(prefix=".incoming-", dir=kept.parent))
        shutil.copytree(generated, staging / "course", ignore=NOT_COPIED)
        try:
            (staging / "course").rename(kept)
        except OSError:  # kept by another grader meanwhile
            pass
        shutil.rmtree(staging, ignore_errors=True)
        _forget_all_but_the_newest(kept.parent)
    except OSError:  # no cache here (a read-only home): the next run generates again
        pass


def _touch(kept: Path) -> None:
    try:
        os.utime(kept)
    except OSError:
        pass


def _forget_all_but_the_newest(folder: Path) -> None:
    courses = sorted((p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")),
                     key=lambda p: p.stat().st_mtime, reverse=True)
    for old in courses[KEPT:]:
        shutil.rmtree(old, ignore_errors=True)
