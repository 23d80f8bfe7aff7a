"""The student's pages: their submissions, the upload form, a submission and its feedback page."""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, HTTPException, Request, UploadFile
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.concurrency import run_in_threadpool

from .guards import FORM_CHECKS, Anyone, Browser, Served, StudentBrowser
from .pages import MATHJAX, page

router = APIRouter()

FEEDBACK_MATH = '<script src="/static/mathjax-config.js"></script><script src="/static/mathjax/tex-mml-chtml.js"></script>'
# The feedback page runs in a sandbox of its own (an opaque origin: no cookie, no request to the
# service as the student), and of scripts only the service's own files: the page's other scripts,
# and anything a student's output could hold, are blocked.
FEEDBACK_CSP = ("sandbox allow-scripts; default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; "
                "img-src data:; font-src 'self'; frame-ancestors 'self'")


@router.get("/me", response_class=HTMLResponse)
def student_page(request: Request, service: Served, person: StudentBrowser):
    views = [service.view(person, s) for s in service.submissions_of(person.id)]
    policies = {a: service.policies[a] for a in service.course.assignments}
    return page(request, "student.html", person, submissions=views, policies=policies, error="")


@router.post("/upload", dependencies=FORM_CHECKS)
async def upload(service: Served, person: StudentBrowser, file: UploadFile,
                 assignment: Annotated[str, Form()] = ""):
    sub, _ = await run_in_threadpool(service.accept, person, await file.read(), file.filename or "",
                                     assignment or None)
    return RedirectResponse(f"/submissions/{sub.id}", 303)


@router.get("/submissions/{submission_id}", response_class=HTMLResponse)
def submission_page(request: Request, service: Served, person: Browser, submission_id: int):
    view = service.view(person, service.own(person, submission_id))
    return page(request, "submission.html", person, sub=view, policy=service.policies[view["assignment"]])


@router.get("/submissions/{submission_id}/feedback", response_class=HTMLResponse)
def feedback(service: Served, person: Anyone, submission_id: int):
    """The grader's feedback page (a cookie or a bearer token), in a sandbox: nothing in it runs."""
    view = service.view(person, service.own(person, submission_id))
    if "feedback_url" not in view:
        raise HTTPException(404, "no feedback page for this submission (yet)")
    html = service.storage.feedback(submission_id).read_text(encoding="utf-8")
    if (MATHJAX / "tex-mml-chtml.js").is_file():  # before the page's last </body>: the template's own
        before, end, after = html.rpartition("</body>")
        html = before + FEEDBACK_MATH + end + after if end else html + FEEDBACK_MATH
    return HTMLResponse(html, headers={"Content-Security-Policy": FEEDBACK_CSP, "X-Frame-Options": "SAMEORIGIN"})
