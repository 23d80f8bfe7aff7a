"""The web application: students submit and read their results, the instructor reads everyone's.

Who is asking: a student's token as ``Authorization: Bearer TOKEN`` (the notebook's
``attention_checks.submit``), or the session cookie a browser gets by logging in with that
token. Every route that shows a submission looks it up with its owner (``_own``): a student
asking for another's submission gets 404, as for one that does not exist. Forms posted with
the cookie carry the session's CSRF token; the JSON API takes the bearer token only, which a
browser never adds by itself. Each token has a rate limit, uploads a size limit, and files
are read only from the data folder (``Storage``), by submission number.

Failures: every refusal is a 4xx with a one-line reason; the database busy or unreachable, or
the data folder unwritable (a full disk), is a 503 that says so and keeps nothing half-stored;
a client that hangs up mid-upload is dropped without a word in the log. ``/health`` is 200 only
while submissions can be graded (``Grader.problems``), else 503 with the reasons.
"""
from __future__ import annotations

import hmac
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict, deque
from dataclasses import dataclass
from datetime import datetime, time as day_start, timezone
from pathlib import Path
from typing import Iterable

from fastapi import FastAPI, Form, HTTPException, Request, UploadFile
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from autograder.cells import grade_id_of
from autograder.instructor import lms
from autograder.report import ResultsWriter
from autograder.results import NotebookResult
from autograder.submissions import load_notebook

from . import db as tables
from .class_report_page import add_class_report
from .db import Database, Person, WebSession, hash_secret, new_secret, one_line
from .policies import Policies

TEMPLATES = Jinja2Templates(directory=Path(__file__).parent / "templates")
STATIC = Path(__file__).parent / "static"
# MathJax 3, installed with the course's web assets (tools/web_assets.py, as the book uses it): the
# only scripts a feedback page may run, served by the service itself (no CDN, which the sandboxed
# page could not reach), so that the course's math reads as math there.
WEB_ASSETS = Path(os.environ.get("COURSE_WEB_ASSETS") or Path(sys.prefix) / "share" / "course-web-assets")
MATHJAX = WEB_ASSETS / "mathjax"
FEEDBACK_MATH = '<script src="/static/mathjax-config.js"></script><script src="/static/mathjax/tex-mml-chtml.js"></script>'
# The feedback page runs in a sandbox of its own (an opaque origin: no cookie, no request to the
# service as the student), and of scripts only the service's own files: the page's other scripts,
# and anything a student's output could hold, are blocked.
FEEDBACK_CSP = ("sandbox allow-scripts; default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; "
                "img-src data:; font-src 'self'; frame-ancestors 'self'")
COOKIE = "autograder_session"
IDEMPOTENCY_KEY = "Idempotency-Key"  # attention_checks.submit's header: one key per upload, the same on a retry
DATABASE_DOWN = "the service's database is busy or unreachable; nothing was stored: try again in a minute"
DISK_DOWN = "the service cannot write its data folder (is the disk full?); nothing was stored: try again later"
SCORE_BINS = 10  # the instructor's score distribution: 0-10 %, ..., 90-100 %


@dataclass
class Limits:
    upload_bytes: int = 10 * 1024**2  # a notebook with a few plots is well under this
    requests_per_minute: int = 120    # per token (or, before logging in, per address)


class RateLimiter:
    """At most ``per_minute`` requests in any 60 s, per key."""

    def __init__(self, per_minute: int):
        self.per_minute, self.lock, self.seen = per_minute, threading.Lock(), defaultdict(deque)

    def check(self, key: str) -> None:
        moment = time.monotonic()
        with self.lock:
            seen = self.seen[key]
            while seen and seen[0] < moment - 60:
                seen.popleft()
            if len(seen) >= self.per_minute:
                raise HTTPException(429, f"too many requests: at most {self.per_minute} a minute",
                                    headers={"Retry-After": str(int(seen[0] + 61 - moment))})
            seen.append(moment)


class BodyLimit:
    """ASGI middleware: a request whose body is over ``limit`` bytes is answered 413 before any
    of it is read, and one that does not say its length (a chunked upload) 411."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] in ("POST", "PUT", "PATCH"):
            length = dict(scope["headers"]).get(b"content-length", b"")
            if not length.isdigit():
                return await _refuse(send, 411, "say the upload's length (Content-Length)")
            if int(length) > self.limit:
                return await _refuse(send, 413, f"the upload is over the {self.limit // 1024**2} MB limit")
        return await self.app(scope, receive, send)


async def _refuse(send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


class Service:
    """What the routes need: the database, the data folder, the prepared course, the policies,
    the grader (told of each new submission) and the limits."""

    def __init__(self, database: Database, storage, course, policies: Policies, grader, limits: Limits,
                 secure_cookies: bool = False):
        self.database, self.storage, self.course, self.policies = database, storage, course, policies
        self.grader, self.limits, self.secure_cookies = grader, limits, secure_cookies
        self.limiter = RateLimiter(limits.requests_per_minute)
        self.notebooks = {a: course.notebooks(a) for a in course.assignments}
        # grade_id -> the assignment whose notebook has that cell (a notebook says which it is)
        self.owner_of_cell = {grade_id: (a, nb) for a, nbs in self.notebooks.items() for nb in nbs
                              for grade_id in course.release_cells(a, nb)}

    # -- who is asking ------------------------------------------------------------------------
    def person(self, request: Request, bearer_only: bool = False) -> tuple[Person | None, WebSession | None]:
        """Who sent the request (read once per request: the rate limit counts requests, not look-ups)."""
        if not hasattr(request.state, "who"):
            request.state.who = self._identify(request)
        person, session = request.state.who
        return (None, None) if bearer_only and session is not None else (person, session)

    def _identify(self, request: Request) -> tuple[Person | None, WebSession | None]:
        header = request.headers.get("authorization", "")
        if header.lower().startswith("bearer "):
            person = self.database.person_by_token(header[7:].strip())
            if person is None:
                raise HTTPException(401, "unknown token", headers={"WWW-Authenticate": "Bearer"})
            self.limiter.check(person.id)
            return person, None
        cookie = request.cookies.get(COOKIE)
        if not cookie:
            return None, None
        with self.database.session() as db:
            session = db.get(WebSession, hash_secret(cookie))
            person = db.get(Person, session.person_id) if session else None
        if person is not None:
            self.limiter.check(person.id)
        return person, session

    def require(self, request: Request, role: str | None = None, bearer_only: bool = False) -> Person:
        person, _ = self.person(request, bearer_only)
        if person is None:
            raise HTTPException(401, "log in with your token first", headers={"WWW-Authenticate": "Bearer"})
        if role and person.role != role:
            raise HTTPException(403, f"only for the {role}")
        return person

    def own(self, person: Person, submission_id: int) -> tables.Submission:
        """The submission, if ``person`` may see it (its student, or an instructor); else 404."""
        with self.database.session() as db:
            sub = db.get(tables.Submission, submission_id)
        if sub is None or (person.role != tables.INSTRUCTOR and sub.person_id != person.id):
            raise HTTPException(404, "no such submission")
        return sub

    # -- submitting ---------------------------------------------------------------------------
    def accept(self, person: Person, data: bytes, filename: str, assignment: str | None,
               key: str | None = None) -> tuple[tables.Submission, bool]:
        """Check the notebook and the assignment's policy, store the notebook, queue it; returns
        it and whether it is new (False: ``key`` named an upload already accepted, returned as it is).

        The count of today's attempts and the insert are one transaction that holds the
        student's lock (``Database.lock_person``): parallel uploads cannot all pass the count."""
        if key is not None:
            with self.database.session() as db:
                known = self._by_key(db, person, key)
            if known is not None:
                return known, False
        if person.role != tables.STUDENT:
            raise HTTPException(403, "only students submit")
        if not filename.endswith(".ipynb"):
            raise HTTPException(415, f"{filename!r} is not a notebook: submit the .ipynb file")
        with tempfile.NamedTemporaryFile(suffix=".ipynb") as tmp:
            tmp.write(data)
            tmp.flush()
            try:
                notebook = load_notebook(Path(tmp.name))
            except ValueError as err:
                raise HTTPException(415, str(err)) from err
        assignment, notebook_name = self._which(notebook, assignment)
        policy, moment = self.policies[assignment], tables.now()
        late = policy.is_late(moment)
        if late and policy.late == "refuse":
            raise HTTPException(403, f"the deadline of {assignment} was {policy.deadline:%Y-%m-%d %H:%M} UTC: "
                                     "late submissions are not accepted")
        with self.database.writing.begin() as db:
            self.database.lock_person(db, person.id)
            known = self._by_key(db, person, key) if key is not None else None
            if known is not None:  # the same upload, sent again while the first was being stored
                return known, False
            if policy.attempts_per_day:
                today = datetime.combine(moment.date(), day_start(), tzinfo=timezone.utc)
                used = self.database.attempts_since(db, person.id, assignment, today)
                if used >= policy.attempts_per_day:
                    raise HTTPException(429, f"you have used today's {policy.attempts_per_day} attempts at "
                                             f"{assignment}; the next one is possible after 00:00 UTC")
            sub = tables.Submission(person_id=person.id, assignment=assignment, notebook=notebook_name,
                                    filename=Path(filename).name[:300], late=late, state="receiving",
                                    idempotency_key=key)
            db.add(sub)
            db.flush()
            self.storage.save_notebook(sub.id, data)  # on disk before it is queued
            sub.state = tables.QUEUED
        self.grader.notify()
        return sub, True

    @staticmethod
    def _by_key(db, person: Person, key: str) -> tables.Submission | None:
        return db.scalar(select(tables.Submission).where(tables.Submission.person_id == person.id,
                                                         tables.Submission.idempotency_key == key))

    def _which(self, notebook, assignment: str | None) -> tuple[str, str]:
        """The assignment and notebook: as named, else by the course's cells in the notebook."""
        if assignment:
            if assignment not in self.notebooks:
                raise HTTPException(400, f"unknown assignment {assignment!r}; known: {', '.join(self.notebooks)}")
            if len(self.notebooks[assignment]) == 1:
                return assignment, self.notebooks[assignment][0]
        votes = Counter(self.owner_of_cell.get(grade_id_of(cell)) for cell in notebook.cells)
        votes.pop(None, None)
        candidates = [owner for owner, _ in votes.most_common() if not assignment or owner[0] == assignment]
        if not candidates:
            raise HTTPException(400, "this notebook has none of the course's cells: name its assignment, "
                                     "or submit the notebook you downloaded from the course")
        return candidates[0]

    # -- what a person sees -------------------------------------------------------------------
    def view(self, person: Person, sub: tables.Submission) -> dict:
        """A submission as its reader may see it: before the deadline of a 'score only'
        assignment a student gets the score, not the per-test results or the feedback page."""
        policy = self.policies[sub.assignment]
        full = person.role == tables.INSTRUCTOR or policy.shows_feedback(tables.now())
        view = {"id": sub.id, "student_id": sub.person_id, "assignment": sub.assignment, "notebook": sub.notebook,
                "filename": sub.filename, "received": tables.as_utc(sub.received).isoformat(), "late": sub.late,
                "graded": tables.as_utc(sub.graded).isoformat() if sub.graded else None,
                "state": sub.state, "status": sub.status, "score": sub.score, "max_score": sub.max_score,
                "written_pending": (sub.result or {}).get("to_grade_by_hand", 0.0),
                "reason": sub.reason, "url": f"/submissions/{sub.id}"}
        if sub.state == tables.QUEUED:
            with self.database.session() as db:
                view["queue_position"] = 1 + db.scalar(select(func.count()).select_from(tables.Submission).where(
                    tables.Submission.state == tables.QUEUED, tables.Submission.id < sub.id))
        if sub.state == tables.DONE and full:
            view["tests"] = [{"grade_id": t["grade_id"], "points": t["points"], "max_points": t["max_points"],
                              "passed": t["passed"]} for t in (sub.result or {}).get("tests", [])]
            if self.storage.feedback(sub.id).is_file():
                view["feedback_url"] = f"/submissions/{sub.id}/feedback"
        elif sub.state == tables.DONE:
            view["feedback_after"] = policy.deadline.isoformat()
        return view

    def submissions_of(self, person_id: str) -> list[tables.Submission]:
        with self.database.session() as db:
            return list(db.scalars(select(tables.Submission).where(tables.Submission.person_id == person_id)
                                   .order_by(tables.Submission.id.desc())))

    def students(self) -> list[Person]:
        with self.database.session() as db:
            return list(db.scalars(select(Person).where(Person.role == tables.STUDENT).order_by(Person.id)))

    def class_table(self, assignment: str) -> list[dict]:
        """One row per student: attempts, best and latest graded scores."""
        with self.database.session() as db:
            subs = list(db.scalars(select(tables.Submission).where(tables.Submission.assignment == assignment)
                                   .order_by(tables.Submission.id)))
        rows = []
        for student in self.students():
            own = [s for s in subs if s.person_id == student.id and s.state != tables.FAILED]  # not attempts
            graded = [s for s in own if s.state == tables.DONE]
            rows.append({"student": student, "attempts": len(own), "pending": len(own) - len(graded),
                         "best": max(graded, key=lambda s: (s.score, s.id)) if graded else None,
                         "latest": graded[-1] if graded else None})
        return rows

    def _roster(self) -> list[lms.Student]:
        return [lms.Student(p.id, p.lms_id or p.id, p.name, p.email) for p in self.students()]

    def _write_results(self, assignment: str, which: str, folder: Path) -> None:
        """Each student's best or latest graded submission written into ``folder`` as ``grade``
        writes its results (grades.csv, results.json, feedback/), which the LMS exports read (with
        the roster, a student with none is 'missing')."""
        chosen = [row[which] for row in self.class_table(assignment) if row[which] is not None]
        if not chosen:  # lms.export needs a graded row for the maximum score
            raise HTTPException(409, f"no graded submission of {assignment} yet")
        writer = ResultsWriter(folder)
        for submission in chosen:
            page = self.storage.feedback(submission.id)
            writer.add(NotebookResult.from_json(submission.result),
                       page.read_text(encoding="utf-8") if page.is_file() else None)
        writer.finish()

    def export(self, assignment: str, fmt: str, which: str) -> str:
        """The class's grades in an LMS's import format (lms.export), with each student's feedback
        comment where the LMS's sheet has a column for it (Moodle)."""
        with tempfile.TemporaryDirectory(prefix="autograder-export-") as tmp:
            self._write_results(assignment, which, Path(tmp))
            out = Path(tmp, f"{assignment}-{fmt}.csv")
            lms.export(Path(tmp, "grades.csv"), fmt, out, assignment, self._roster())
            return out.read_text(encoding="utf-8")

    def feedback_zip(self, assignment: str, fmt: str, which: str) -> tuple[bytes, int]:
        """Moodle's "Upload multiple feedback files in a zip": each graded student's feedback page
        in a folder named as Moodle's download names it (lms.feedback_upload); returns the zip and
        how many graded students it leaves out (no Moodle participant id on the roster)."""
        if fmt != "moodle":
            raise HTTPException(409, "Canvas attaches re-uploaded files by the user and file ids in its own "
                                     "submissions download, and a notebook submitted here has none: for Canvas, "
                                     "collect its download and run `export --format canvas --feedback-zip` (README)")
        with tempfile.TemporaryDirectory(prefix="autograder-export-") as tmp:
            self._write_results(assignment, which, Path(tmp))
            _, rows, _ = lms.grade_rows(Path(tmp, "grades.csv"), assignment, self._roster())
            upload = lms.feedback_upload(Path(tmp), fmt, rows, assignment)
            archive = Path(tmp, "feedback.zip")
            lms.write_zip(archive, upload.members)
            return archive.read_bytes(), len(upload.left_out)


def score_distribution(scores: Iterable[float], max_score: float) -> list[dict]:
    counts = [0] * SCORE_BINS
    for score in scores:
        counts[min(SCORE_BINS - 1, int(SCORE_BINS * score / max_score))] += 1
    top = max(counts) or 1
    return [{"label": f"{100 * n // SCORE_BINS}-{100 * (n + 1) // SCORE_BINS} %", "count": c,
             "width": round(100 * c / top)} for n, c in enumerate(counts)]


def create_app(service: Service) -> FastAPI:
    app = FastAPI(title="Attention from scratch: submissions", docs_url=None, redoc_url=None, openapi_url=None)
    login_limiter = RateLimiter(service.limits.requests_per_minute)

    if MATHJAX.is_dir():  # before /static, which would answer for it
        app.mount("/static/mathjax", StaticFiles(directory=MATHJAX), name="mathjax")
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    add_class_report(app, service)  # /instructor/report/<assignment>: the class's mistakes

    @app.middleware("http")
    async def security_headers(request: Request, call_next):
        response = await call_next(request)
        if request.url.path.startswith("/static/"):
            # MathJax's fonts, fetched from a sandboxed page, whose origin is opaque: CORS lets them load
            response.headers.setdefault("Access-Control-Allow-Origin", "*")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        response.headers.setdefault("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; "
                                                                       "frame-ancestors 'none'")
        return response

    def page(request: Request, template: str, person: Person | None, **context) -> HTMLResponse:
        _, session = service.person(request) if person else (None, None)
        return TEMPLATES.TemplateResponse(request, template, {"person": person, "csrf": session.csrf_token
                                                              if session else "", **context})

    def web_person(request: Request, role: str | None = None) -> Person:
        person, _ = service.person(request)
        if person is None:
            raise _Redirect("/")
        if role and person.role != role:
            raise HTTPException(403, f"only for the {role}")
        return person

    def check_csrf(request: Request, token: str) -> None:
        _, session = service.person(request)
        if session is None or not token or not hmac.compare_digest(token.encode(), session.csrf_token.encode()):
            raise HTTPException(403, "the form is stale or came from another site (CSRF check): reload the page")

    @app.exception_handler(_Redirect)
    async def redirect(request: Request, exc: "_Redirect"):
        return RedirectResponse(exc.url, status_code=303)

    @app.get("/health")
    def health() -> JSONResponse:
        """200 while submissions are graded; 503 with the reasons while they cannot be."""
        try:
            with service.database.session() as db:
                waiting = db.scalar(select(func.count()).select_from(tables.Submission)
                                    .where(tables.Submission.state.in_((tables.QUEUED, tables.GRADING))))
            problems = service.grader.problems(waiting)
            blocked = service.database.write_blocked()
            problems += [blocked] if blocked else []
        except SQLAlchemyError as err:
            waiting, problems = None, [f"the database cannot be read: {one_line(err)}"]
        return JSONResponse({"ok": not problems, "problems": problems, "assignments": service.course.assignments,
                             "waiting": waiting}, status_code=503 if problems else 200)

    # -- logging in ---------------------------------------------------------------------------
    @app.get("/", response_class=HTMLResponse)
    def home(request: Request):
        person, _ = service.person(request)
        if person is not None:
            return RedirectResponse("/instructor" if person.role == tables.INSTRUCTOR else "/me", 303)
        return page(request, "login.html", None)

    @app.post("/login")
    def login(request: Request, token: str = Form("")):
        login_limiter.check(request.client.host if request.client else "?")
        person = service.database.person_by_token(token.strip())
        if person is None:
            return page(request, "login.html", None, error="That token is not known: copy it again from "
                                                            "the message your instructor sent.")
        session_id = new_secret()
        with service.database.session.begin() as db:
            db.add(WebSession(id_hash=hash_secret(session_id), person_id=person.id, csrf_token=new_secret()))
        response = RedirectResponse("/", 303)
        response.set_cookie(COOKIE, session_id, httponly=True, samesite="strict", secure=service.secure_cookies)
        return response

    @app.post("/logout")
    def logout(request: Request, csrf: str = Form("")):
        check_csrf(request, csrf)
        with service.database.session.begin() as db:
            db.delete(db.get(WebSession, hash_secret(request.cookies[COOKIE])))
        response = RedirectResponse("/", 303)
        response.delete_cookie(COOKIE)
        return response

    # -- students -----------------------------------------------------------------------------
    @app.get("/me", response_class=HTMLResponse)
    def student_page(request: Request):
        person = web_person(request, tables.STUDENT)
        views = [service.view(person, s) for s in service.submissions_of(person.id)]
        policies = {a: service.policies[a] for a in service.course.assignments}
        return page(request, "student.html", person, submissions=views, policies=policies, error="")

    @app.post("/upload")
    async def upload(request: Request, file: UploadFile, assignment: str = Form(""), csrf: str = Form("")):
        check_csrf(request, csrf)
        person = web_person(request, tables.STUDENT)
        sub, _ = await run_in_threadpool(service.accept, person, await file.read(), file.filename or "",
                                         assignment or None)
        return RedirectResponse(f"/submissions/{sub.id}", 303)

    @app.get("/submissions/{submission_id}", response_class=HTMLResponse)
    def submission_page(request: Request, submission_id: int):
        person = web_person(request)
        view = service.view(person, service.own(person, submission_id))
        return page(request, "submission.html", person, sub=view, policy=service.policies[view["assignment"]])

    @app.get("/submissions/{submission_id}/feedback", response_class=HTMLResponse)
    def feedback(request: Request, submission_id: int):
        """The grader's feedback page (a cookie or a bearer token), in a sandbox: nothing in it runs."""
        person, _ = service.person(request)
        if person is None:
            raise HTTPException(401, "log in with your token first")
        view = service.view(person, service.own(person, submission_id))
        if "feedback_url" not in view:
            raise HTTPException(404, "no feedback page for this submission (yet)")
        page = service.storage.feedback(submission_id).read_text(encoding="utf-8")
        if (MATHJAX / "tex-mml-chtml.js").is_file():  # before the page's last </body>: the template's own
            before, end, after = page.rpartition("</body>")
            page = before + FEEDBACK_MATH + end + after if end else page + FEEDBACK_MATH
        return HTMLResponse(page, headers={"Content-Security-Policy": FEEDBACK_CSP, "X-Frame-Options": "SAMEORIGIN"})

    # -- the notebook's API (bearer token) ----------------------------------------------------
    @app.post("/api/submissions", status_code=202)
    async def api_submit(request: Request):
        """202 for a new submission; 200 for an upload already accepted under the same
        ``Idempotency-Key`` (a client's retry), with what became of it."""
        person = service.require(request, bearer_only=True)
        key = request.headers.get(IDEMPOTENCY_KEY)
        if key is not None and not (0 < len(key) <= 64 and key.isascii() and key.isprintable()):
            raise HTTPException(400, f"the {IDEMPOTENCY_KEY} header must be 1 to 64 printable ASCII characters")
        body = await request.body()
        try:
            sent = json.loads(body)
            notebook, filename = sent["notebook"], str(sent.get("filename") or "notebook.ipynb")
            assignment = sent.get("assignment") or None
            if not isinstance(notebook, (str, dict)) or not isinstance(assignment, (str, type(None))):
                raise TypeError
            data = (notebook if isinstance(notebook, str) else json.dumps(notebook)).encode()
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
            raise HTTPException(400, 'send JSON: {"notebook": <the notebook>, "filename": "...", '
                                     '"assignment": "..." (optional)}') from err
        sub, new = await run_in_threadpool(service.accept, person, data, filename, assignment, key)
        return JSONResponse(service.view(person, sub), status_code=202 if new else 200)

    @app.get("/api/submissions")
    def api_list(request: Request) -> list[dict]:
        person = service.require(request)
        return [service.view(person, s) for s in service.submissions_of(person.id)]

    @app.get("/api/submissions/{submission_id}")
    def api_get(request: Request, submission_id: int) -> dict:
        person = service.require(request)
        return service.view(person, service.own(person, submission_id))

    # -- the instructor -----------------------------------------------------------------------
    @app.get("/instructor", response_class=HTMLResponse)
    def instructor_page(request: Request, assignment: str = ""):
        person = web_person(request, tables.INSTRUCTOR)
        assignment = assignment if assignment in service.notebooks else service.course.assignments[0]
        rows = service.class_table(assignment)
        best = [r["best"] for r in rows if r["best"] is not None]
        distribution = score_distribution([s.score for s in best], best[0].max_score) if best else []
        return page(request, "instructor.html", person, assignment=assignment, rows=rows,
                    assignments=service.course.assignments, distribution=distribution, graded=len(best),
                    policy=service.policies[assignment])

    @app.get("/instructor/students/{student_id}", response_class=HTMLResponse)
    def student_history(request: Request, student_id: str):
        person = web_person(request, tables.INSTRUCTOR)
        with service.database.session() as db:
            student = db.get(Person, student_id)
        if student is None:
            raise HTTPException(404, "no such student")
        views = [service.view(person, s) for s in service.submissions_of(student_id)]
        return page(request, "history.html", person, student=student, submissions=views)

    @app.get("/instructor/export/{assignment}")
    def export(request: Request, assignment: str, format: str = "csv", which: str = "best"):
        service.require(request, tables.INSTRUCTOR)
        if assignment not in service.notebooks or format not in ("canvas", "moodle", "csv") \
                or which not in ("best", "latest"):
            raise HTTPException(400, "export/<assignment>?format=canvas|moodle|csv&which=best|latest")
        return Response(service.export(assignment, format, which), media_type="text/csv", headers={
            "Content-Disposition": f'attachment; filename="{assignment}-{which}-{format}.csv"'})

    @app.get("/instructor/export/{assignment}/feedback")
    def export_feedback(request: Request, assignment: str, format: str = "moodle", which: str = "best"):
        service.require(request, tables.INSTRUCTOR)
        if assignment not in service.notebooks or format not in ("canvas", "moodle") or which not in ("best", "latest"):
            raise HTTPException(400, "export/<assignment>/feedback?format=moodle&which=best|latest")
        archive, left_out = service.feedback_zip(assignment, format, which)
        return Response(archive, media_type="application/zip", headers={
            "Content-Disposition": f'attachment; filename="{assignment}-{which}-{format}-feedback.zip"',
            "X-Students-Left-Out": str(left_out)})

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException):
        """JSON for the API and scripts; a page for a browser."""
        if "text/html" in request.headers.get("accept", "") and not request.url.path.startswith("/api/"):
            person, session = getattr(request.state, "who", (None, None))
            response = TEMPLATES.TemplateResponse(request, "error.html", {
                "person": person, "csrf": session.csrf_token if session else "", "status": exc.status_code,
                "detail": exc.detail}, status_code=exc.status_code)
        else:
            response = JSONResponse({"detail": exc.detail}, status_code=exc.status_code)
        for key, value in (exc.headers or {}).items():
            response.headers[key] = value
        return response

    @app.exception_handler(SQLAlchemyError)
    async def database_down(request: Request, exc: SQLAlchemyError):
        print(f"autograder serve: {request.method} {request.url.path}: database: {one_line(exc)}", file=sys.stderr)
        return await http_error(request, HTTPException(503, DATABASE_DOWN, headers={"Retry-After": "60"}))

    @app.exception_handler(OSError)
    async def disk_down(request: Request, exc: OSError):
        print(f"autograder serve: {request.method} {request.url.path}: data folder: {exc}", file=sys.stderr)
        return await http_error(request, HTTPException(503, DISK_DOWN, headers={"Retry-After": "60"}))

    @app.exception_handler(ClientDisconnect)
    async def hung_up(request: Request, exc: ClientDisconnect):
        """The client went away mid-request: nothing was stored, and nobody reads the answer."""
        return Response(status_code=400)

    app.add_middleware(BodyLimit, limit=service.limits.upload_bytes + 64 * 1024)  # room for the form's other fields
    return app


class _Redirect(Exception):
    def __init__(self, url: str):
        self.url = url
