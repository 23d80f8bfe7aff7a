"""Grade one student's assignment with nbgrader: autograde, then feedback."""
from __future__ import annotations

from pathlib import Path

import nbformat
from nbgrader.api import Gradebook

from .course import COURSE_ID, Course
from .scoring import NotebookResult, test_results, timed_out
from .submissions import Submission, load_notebook


def grade_assignment(course: Course, submissions: list[Submission]) -> list[NotebookResult]:
    """Grade the notebooks of one student and one assignment (all of ``submissions``)."""
    student_id, assignment = submissions[0].student_id, submissions[0].assignment
    submitted = course.path("submitted", student_id, assignment)
    submitted.mkdir(parents=True, exist_ok=True)

    results: dict[str, NotebookResult] = {}
    to_grade = []
    for sub in submissions:
        def result(status, reason):
            return NotebookResult(student_id, assignment, sub.notebook, status, 0.0,
                                  course.max_score(assignment, sub.notebook), reason=reason)
        if sub.path is None:
            results[sub.notebook] = result("missing", sub.note)
            continue
        try:
            notebook = load_notebook(sub.path)
        except (ValueError, OSError) as err:
            results[sub.notebook] = result("invalid", str(err))
            continue
        # Only the notebook is copied: files beside it (say, a module that shadows
        # the check helpers) never reach the grading kernel.
        nbformat.write(notebook, submitted / f"{sub.notebook}.ipynb")
        to_grade.append(sub)

    if to_grade:
        outcome = course.api.autograde(assignment, student_id, force=True, create=True)
        for sub in to_grade:
            if outcome["success"]:
                results[sub.notebook] = _read_result(course, sub)
            else:
                reason = _last_line(outcome.get("error") or outcome.get("log") or "nbgrader failed")
                results[sub.notebook] = NotebookResult(
                    student_id, assignment, sub.notebook, "error", 0.0,
                    course.max_score(assignment, sub.notebook), reason=f"autograde failed: {reason}")
        if outcome["success"]:
            course.api.generate_feedback(assignment, student_id, force=True)
    return [results[sub.notebook] for sub in submissions]


def feedback_file(course: Course, student_id: str, assignment: str, notebook: str) -> Path:
    return course.path("feedback", student_id, assignment) / f"{notebook}.html"


def _read_result(course: Course, sub: Submission) -> NotebookResult:
    with Gradebook(course.db_url, COURSE_ID) as gb:
        graded = gb.find_submission_notebook(sub.notebook, sub.assignment, sub.student_id)
        scores = {g.name: (float(g.score or 0.0), float(g.max_score)) for g in graded.grades}
        score, max_score = float(graded.score), float(graded.max_score)
    autograded = nbformat.read(course.path("autograded", sub.student_id, sub.assignment)
                               / f"{sub.notebook}.ipynb", as_version=4)
    status = "timeout" if timed_out(autograded) else "ok"
    reason = "a cell ran past the time limit and was interrupted" if status == "timeout" else sub.note
    return NotebookResult(sub.student_id, sub.assignment, sub.notebook, status, score, max_score,
                          test_results(autograded, scores), reason)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else text
