"""The instructor's pages: each assignment's class table and score distribution, a student's
history, the LMS exports, and the class's mistakes (the page ``python -m autograder report``
writes, from each student's best, or ``?which=latest`` latest, graded submission)."""
from __future__ import annotations

from typing import Iterable

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse, Response

from autograder.instructor.class_report import class_reports, render_page
from autograder.instructor.lms import Score

from ..db import Person
from .guards import InstructorBrowser, Served, instructor_only
from .pages import page

router = APIRouter(prefix="/instructor")

SCORE_BINS = 10  # the score distribution: 0-10 %, ..., 90-100 %
# The class report's figures are embedded PNGs (data: URLs), which the service's default policy refuses.
REPORT_POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; frame-ancestors 'none'"


def score_distribution(scores: Iterable[float], max_score: float) -> list[dict]:
    counts = [0] * SCORE_BINS
    for score in scores:
        counts[min(SCORE_BINS - 1, int(SCORE_BINS * score / max_score))] += 1
    top = max(counts) or 1
    return [{"label": f"{100 * n // SCORE_BINS}-{100 * (n + 1) // SCORE_BINS} %", "count": c,
             "width": round(100 * c / top)} for n, c in enumerate(counts)]


@router.get("", response_class=HTMLResponse)
def instructor_page(request: Request, service: Served, person: InstructorBrowser, assignment: str = ""):
    assignment = assignment if assignment in service.notebooks else service.course.assignments[0]
    rows = service.class_table(assignment)
    best = [r["best"] for r in rows if r["best"] is not None]
    distribution = score_distribution([Score(s.score, s.max_score).share for s in best], 1.0) if best else []
    return page(request, "instructor.html", person, assignment=assignment, rows=rows,
                assignments=service.course.assignments, distribution=distribution, graded=len(best),
                policy=service.policies[assignment])


@router.get("/students/{student_id}", response_class=HTMLResponse)
def student_history(request: Request, service: Served, person: InstructorBrowser, student_id: str):
    with service.database.session() as db:
        student = db.get(Person, student_id)
    if student is None:
        raise HTTPException(404, "no such student")
    views = [service.view(person, s) for s in service.submissions_of(student_id)]
    return page(request, "history.html", person, student=student, submissions=views)


@router.get("/export/{assignment}", dependencies=[Depends(instructor_only)])
def export(service: Served, assignment: str, format: str = "csv", which: str = "best"):
    if assignment not in service.notebooks or format not in ("canvas", "moodle", "csv") \
            or which not in ("best", "latest"):
        raise HTTPException(400, "export/<assignment>?format=canvas|moodle|csv&which=best|latest")
    return Response(service.export(assignment, format, which), media_type="text/csv", headers={
        "Content-Disposition": f'attachment; filename="{assignment}-{which}-{format}.csv"'})


@router.get("/export/{assignment}/feedback", dependencies=[Depends(instructor_only)])
def export_feedback(service: Served, assignment: str, format: str = "moodle", which: str = "best"):
    if assignment not in service.notebooks or format not in ("canvas", "moodle") or which not in ("best", "latest"):
        raise HTTPException(400, "export/<assignment>/feedback?format=moodle&which=best|latest")
    archive, left_out = service.feedback_zip(assignment, format, which)
    return Response(archive, media_type="application/zip", headers={
        "Content-Disposition": f'attachment; filename="{assignment}-{which}-{format}-feedback.zip"',
        "X-Students-Left-Out": str(left_out)})


@router.get("/report/{assignment}", response_class=HTMLResponse, dependencies=[Depends(instructor_only)])
def class_report(service: Served, assignment: str, which: str = "best"):
    if assignment not in service.notebooks or which not in ("best", "latest"):
        raise HTTPException(400, "report/<assignment>?which=best|latest")
    chosen = [row[which].result for row in service.class_table(assignment) if row[which] is not None]
    if not chosen:
        raise HTTPException(409, f"no graded submission of {assignment} yet")
    html = render_page(class_reports(chosen), f"the service: each student's {which} graded submission")
    return HTMLResponse(html, headers={"Content-Security-Policy": REPORT_POLICY})
