"""The throwaway nbgrader course each grading run works in (autograder/grading/course.py)."""
from __future__ import annotations

from nbgrader.api import Gradebook
from sqlalchemy import text

from autograder.grading.course import Course, new_gradebook
from autograder.layout import SOLUTIONS_DIR
from autograder.options import GradingOptions

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
