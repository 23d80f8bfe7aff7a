"""The class's mistakes on the service's instructor pages: ``/instructor/report/<assignment>``,
the page ``python -m autograder report`` writes (instructor.class_report), from each student's
best (``?which=latest``: latest) graded submission in the database."""
from __future__ import annotations

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse

from autograder.instructor.class_report import class_reports, render_page

from . import db as tables

# The page's figures are embedded PNGs (data: URLs), which the service's default policy refuses.
PAGE_POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; frame-ancestors 'none'"


def add_class_report(app: FastAPI, service) -> None:
    """The route, on ``app`` of ``service`` (app.Service)."""

    @app.get("/instructor/report/{assignment}", response_class=HTMLResponse)
    def class_report(request: Request, assignment: str, which: str = "best"):
        service.require(request, tables.INSTRUCTOR)
        if assignment not in service.notebooks or which not in ("best", "latest"):
            raise HTTPException(400, "report/<assignment>?which=best|latest")
        chosen = [row[which].result for row in service.class_table(assignment) if row[which] is not None]
        if not chosen:
            raise HTTPException(409, f"no graded submission of {assignment} yet")
        page = render_page(class_reports(chosen), f"the service: each student's {which} graded submission")
        return HTMLResponse(page, headers={"Content-Security-Policy": PAGE_POLICY})
