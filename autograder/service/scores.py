"""One score for a submission, the same on every page (the student's, the class table, the
distribution, the feedback page; docs/instructors/service.md): a written answer
that awaits a person is left out of both the points and the maximum, and shown apart as
"written answer: pending (N points)"; once it has a score (a person's, or nbgrader's 0 for an
answer left as released) it counts in both.

``NotebookResult`` keeps the autograded points (``score``, ``max_score``) and the written
answers' (``written_points``, of which ``to_grade_by_hand`` await a person); the rule itself is
the instructor's side's, the one place it is computed (``lms.course_score``), so the service's
pages and the LMS exports cannot disagree.
"""
from __future__ import annotations

from math import fsum

from autograder.instructor.lms import Score, course_score
from autograder.results import NotebookResult


def counted(result: NotebookResult) -> Score:
    """A graded submission's score under the course's one rule (``lms.course_score``)."""
    scored = [t.points for t in result.tests if t.manual and t.points is not None]
    return course_score(fsum([result.score, *scored]), result.max_score, result.written_points,
                        result.to_grade_by_hand)
