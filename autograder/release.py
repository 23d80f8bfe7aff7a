"""Regenerate the student notebooks (exercises/) from the source notebooks (solutions/).

nbgrader's generate_assignment does the work: solution regions become
``raise NotImplementedError()``, hidden tests are removed, outputs cleared and
checksums recorded. The result is committed, and a test checks it is up to date.
"""
from __future__ import annotations

import filecmp
import shutil
import tempfile
from pathlib import Path

from .course import EXERCISES_DIR, SOLUTIONS_DIR, Course


def generate(source_dir: Path, dest_dir: Path, assignments: list[str] | None = None) -> list[str]:
    """Write ``dest_dir/<assignment>/`` for each assignment; returns the assignments written."""
    with tempfile.TemporaryDirectory(prefix="autograder-release-") as tmp:
        course = Course(Path(tmp), source_dir)
        chosen = assignments or course.assignments
        unknown = sorted(set(chosen) - set(course.assignments))
        if unknown:
            raise SystemExit(f"unknown assignment(s): {', '.join(unknown)}; "
                             f"known: {', '.join(course.assignments)}")
        for assignment in chosen:
            released = course.generate(assignment)
            target = dest_dir / assignment
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(released, target)
    return chosen


def stale_files(source_dir: Path = SOLUTIONS_DIR, exercises_dir: Path = EXERCISES_DIR) -> list[str]:
    """Paths under exercises/ that differ from a fresh release (empty when up to date)."""
    with tempfile.TemporaryDirectory(prefix="autograder-release-check-") as tmp:
        fresh = Path(tmp)
        generate(source_dir, fresh)
        return sorted(_differences(filecmp.dircmp(fresh, exercises_dir), Path()))


def _differences(cmp: filecmp.dircmp, prefix: Path):
    for name in cmp.left_only + cmp.right_only + cmp.diff_files + cmp.funny_files:
        yield str(prefix / name)
    for name, sub in cmp.subdirs.items():
        yield from _differences(sub, prefix / name)
