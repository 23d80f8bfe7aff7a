"""What the service's routes do, apart from the web: who may read a submission, accepting an
upload (the notebook checked, the assignment's policy applied, stored and queued in one
transaction), a submission as its reader may see it, the class table and the LMS exports.

The web around it (who is asking, the forms' checks, the pages and the JSON API) is in
``routes/``; ``app.create_app`` puts the two together.
"""
from __future__ import annotations

import tempfile
import unicodedata
from dataclasses import dataclass
from datetime import datetime, time as day_start, timezone
from pathlib import Path

from fastapi import HTTPException
from sqlalchemy import func, select

from autograder.cells import grade_id_of
from autograder.instructor import lms
from autograder.report import ResultsWriter
from autograder.results import NotebookResult
from autograder.submissions import load_notebook

from . import db as tables
from .db import Database, Person
from .policies import Policies

MAX_ID = 2**31 - 1  # submissions' ids: an INTEGER column (PostgreSQL's is 32 bits)


@dataclass
class Limits:
    upload_bytes: int = 10 * 1024**2  # a notebook with a few plots is well under this
    requests_per_minute: int = 120    # per token (or, before logging in, per address)


class Service:
    """What the routes need: the database, the data folder, the prepared course, the policies,
    the grader (told of each new submission) and the limits."""

    def __init__(self, database: Database, storage, course, policies: Policies, grader, limits: Limits,
                 secure_cookies: bool = False):
        self.database, self.storage, self.course, self.policies = database, storage, course, policies
        self.grader, self.limits, self.secure_cookies = grader, limits, secure_cookies
        self.notebooks = {a: course.notebooks(a) for a in course.assignments}
        # (assignment, notebook) -> the grade ids of its cells, in the course's order (a notebook says which it is)
        self.cells_of = {(a, nb): set(course.release_cells(a, nb)) for a, nbs in self.notebooks.items() for nb in nbs}

    def own(self, person: Person, submission_id: int) -> tables.Submission:
        """The submission, if ``person`` may see it (its student, or an instructor); else 404 (as
        for a number beyond the database's integers, which no submission can have)."""
        if not 0 < submission_id <= MAX_ID:
            raise HTTPException(404, "no such submission")
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
        if any(unicodedata.category(c) in ("Cc", "Cs") for c in filename):  # NUL: no database stores it
            raise HTTPException(400, f"the file name {filename!r} holds control characters: rename the file")
        if not filename.endswith(".ipynb"):
            raise HTTPException(415, f"{filename!r} is not a notebook: submit the .ipynb file")
        with tempfile.NamedTemporaryFile(suffix=".ipynb") as tmp:
            tmp.write(data)
            tmp.flush()
            try:
                notebook = load_notebook(Path(tmp.name))
            except (ValueError, RecursionError) as err:  # JSON's reader, or nbformat's, gives up past Python's stack
                if RecursionError in (type(err), type(err.__cause__)):
                    raise HTTPException(400, "the notebook's JSON is nested too deeply to be a notebook") from err
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
        """The assignment and notebook whose cells the notebook has most of; where the student
        named the assignment, it must be among those (a notebook of another assignment, or with
        none of the course's cells, is refused before it is an attempt). Several with the same
        cells (one notebook under two names): the one the course lists last, unless named."""
        if assignment and assignment not in self.notebooks:
            raise HTTPException(400, f"unknown assignment {assignment!r}; known: {', '.join(self.notebooks)}")
        grade_ids = {grade_id for cell in notebook.cells if isinstance(grade_id := grade_id_of(cell), str)}
        shared = {owner: len(grade_ids & cells) for owner, cells in self.cells_of.items()}
        most = max(shared.values(), default=0)
        if not most:
            raise HTTPException(400, "this notebook has none of the course's cells: submit the notebook you "
                                     "downloaded from the course, with your answers in its cells")
        fitting = [owner for owner, count in shared.items() if count == most]
        if not assignment:
            return fitting[-1]
        named = [owner for owner in fitting if owner[0] == assignment]
        if not named:
            others = ", ".join(dict.fromkeys(a for a, _ in fitting))
            raise HTTPException(400, f"this notebook is {others}'s (it has {most} of its cells), not {assignment}'s: "
                                     f"submit your {assignment} notebook, or name the assignment it is")
        return named[0]

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
                                     "collect its download and run `export --format canvas --feedback-zip` (docs/instructors/lms.md)")
        with tempfile.TemporaryDirectory(prefix="autograder-export-") as tmp:
            self._write_results(assignment, which, Path(tmp))
            _, rows, _ = lms.grade_rows(Path(tmp, "grades.csv"), assignment, self._roster())
            upload = lms.feedback_upload(Path(tmp), fmt, rows, assignment)
            archive = Path(tmp, "feedback.zip")
            lms.write_zip(archive, upload.members)
            return archive.read_bytes(), len(upload.left_out)


