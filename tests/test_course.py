"""The throwaway nbgrader course each grading run works in (autograder/grading/course.py)."""
from __future__ import annotations

import pytest
from nbgrader.api import Gradebook
from sqlalchemy import text

from autograder.grading.course import Course, new_gradebook
from autograder.layout import SOLUTIONS_DIR
from autograder.options import GradingOptions
from autograder.sandbox.bwrap import bwrap_available, sandbox_limits
from autograder.sandbox.kernels import SandboxedKernelManager

SYNCHRONOUS_OFF, SYNCHRONOUS_FULL = 0, 2  # what SQLite's `PRAGMA synchronous` answers


def _synchronous(db_url: str) -> int:
    with Gradebook(db_url, "course") as gradebook:
        return gradebook.db.execute(text("PRAGMA synchronous")).scalar_one()


def test_only_the_courses_own_gradebook_skips_waiting_for_the_disk(tmp_path):
    """nbgrader commits once per cell: the course's scratch gradebook does not wait for the disk
    on each, and any other gradebook the process opens (an instructor's, when the service
    records into it) keeps SQLite's durable default."""
    course = Course(tmp_path / "course", GradingOptions(SOLUTIONS_DIR, sandbox=False),
                    assignments=["01-self-attention"])
    instructors = tmp_path / "instructor" / "gradebook.db"
    instructors.parent.mkdir()
    new_gradebook(instructors)
    assert _synchronous(course.db_url) == SYNCHRONOUS_OFF
    assert _synchronous(f"sqlite:///{instructors}") == SYNCHRONOUS_FULL


@pytest.mark.skipif(not bwrap_available(), reason="a sandboxed course needs bubblewrap")
def test_the_sandbox_grade_starts_early_is_the_one_its_kernels_use(tmp_path):
    """`grade` launches a fork server for ``sandbox_limits(options.memory_limit)`` before it loads
    the grader (cli._start_grading_early); the course's kernels look theirs up by the limits their
    manager is configured with. Were the two to differ, the early start would be wasted, silently."""
    options = GradingOptions(SOLUTIONS_DIR, memory_limit=3 * 1024**3)
    course = Course(tmp_path / "course", options, assignments=["01-self-attention"])
    manager = SandboxedKernelManager(config=course.api.config)
    assert manager._limits() == sandbox_limits(options.memory_limit)


def test_a_process_keeps_one_engine_per_gradebook(tmp_path):
    """nbgrader makes a new SQLAlchemy engine for every Gradebook it opens, several per notebook,
    and SQLAlchemy keeps compiled statements per engine: the course keeps one engine per URL.
    A closed gradebook still lets its file go: a new file at the same path is a new gradebook."""
    path = tmp_path / "gradebook.db"
    new_gradebook(path)
    url = f"sqlite:///{path}"
    with Gradebook(url, "course") as first:
        first.add_student("ada")
    with Gradebook(url, "course") as second:
        assert second.engine is first.engine
        assert [student.id for student in second.students] == ["ada"]
    path.unlink()
    new_gradebook(path)
    with Gradebook(url, "course") as third:
        assert third.students == []
