"""One score for a submission, the same on every page (the student's, the class table, the
distribution, the feedback page; README, "Running a submission service"): a written answer
that awaits a person is left out of both the points and the maximum, and shown apart as
"written answer: pending (N points)"; once it has a score (a person's, or nbgrader's 0 for an
answer left as released) it counts in both.

``NotebookResult`` keeps the autograded points (``score``, ``max_score``) and the written
answers' (``written_points``, of which ``to_grade_by_hand`` await a person); this adds the
written answers that have a score to both.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import fsum

from autograder.results import NotebookResult


@dataclass(frozen=True)
class Score:
    points: float
    maximum: float
    pending: float  # written answers' points that await a person: in neither of the above


def counted(result: NotebookResult) -> Score:
    scored = [t.points for t in result.tests if t.manual and t.points is not None]
    return Score(fsum([result.score, *scored]),
                 fsum([result.max_score, result.written_points, -result.to_grade_by_hand]),
                 result.to_grade_by_hand)
