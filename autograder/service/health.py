"""What ``/health`` answers, at once, whatever holds the database.

A thread checks every ``PERIOD_SECONDS`` what keeps submissions from being graded or uploads
from being stored, and counts what waits; ``/health`` answers with its last check, so it never
waits for a lock itself (the check does, within ``db.BUSY_SECONDS``; a check that has not
finished for ``STALE_SECONDS`` is a problem of its own). It is 503 with the reasons when:

- the grader cannot grade (``Grader.problems``: a grading thread dead or retrying, the engine
  unreachable, the database's lease lost, the queue stalled);
- an upload would fail: another program holds SQLite's write lock, the database cannot be
  read, or a folder of the data folder cannot be written or has less room than the largest
  upload (each folder is written to, a small file, at every check).

It also counts, without failing for them: submissions that wait for a pause after a failure of
the grader's (``retrying``), set aside after ``MAX_TRIES`` such failures (``set_aside``: tried
again by themselves), and graded notebooks whose feedback page is missing (``without_feedback``).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from fastapi.responses import JSONResponse
from sqlalchemy import func, or_, select
from sqlalchemy.exc import SQLAlchemyError

from . import db as tables
from .db import one_line

PERIOD_SECONDS = 1.0
STALE_SECONDS = 10.0
WITHOUT_FEEDBACK_SHOWN = 10  # ids named in the answer; the count is whole


@dataclass(frozen=True)
class Check:
    problems: list[str]
    waiting: int | None = None  # queued and ready, or being graded
    retrying: int | None = None
    set_aside: int | None = None
    without_feedback: list[int] = field(default_factory=list)
    finished: float = field(default_factory=time.monotonic)


class Health:
    def __init__(self, grader, database, storage):
        self.grader, self.database, self.storage = grader, database, storage
        self.last: Check | None = None
        self.lock = threading.Lock()  # the first answers start the thread once
        self.thread: threading.Thread | None = None

    def answer(self, assignments: list[str], upload_bytes: int) -> JSONResponse:
        """``/health``'s answer: the last check (the first one made now), 200 only without problems."""
        with self.lock:
            if self.thread is None:
                self.last = self.check(upload_bytes)
                self.thread = threading.Thread(target=self._check_every_period, args=(upload_bytes,),
                                               name="health", daemon=True)
                self.thread.start()
        last = self.last
        problems = list(last.problems)
        age = time.monotonic() - last.finished
        if age > STALE_SECONDS:
            problems.append(f"the service's health check has not finished for {age:.0f} s: "
                            "the database or the data folder does not answer")
        return JSONResponse({"ok": not problems, "problems": problems, "assignments": assignments,
                             "waiting": last.waiting, "retrying": last.retrying, "set_aside": last.set_aside,
                             "without_feedback": len(last.without_feedback),
                             "without_feedback_ids": last.without_feedback[:WITHOUT_FEEDBACK_SHOWN],
                             "checked_seconds_ago": round(age, 1)}, status_code=503 if problems else 200)

    def _check_every_period(self, upload_bytes: int) -> None:
        while not self.grader.stopping:
            time.sleep(PERIOD_SECONDS)
            self.last = self.check(upload_bytes)

    def check(self, upload_bytes: int) -> Check:
        problems = self.storage.unwritable(upload_bytes)
        try:
            waiting, retrying, set_aside = self._counts()
        except SQLAlchemyError as err:
            return Check(problems + [f"the database cannot be read: {one_line(err)}"])
        blocked = self.database.write_blocked()
        problems += [blocked] if blocked else []
        problems += self.grader.problems(waiting)
        graded = self.storage.without_feedback()
        return Check(problems, waiting, retrying, set_aside, sorted(graded))

    def _counts(self) -> tuple[int, int, int]:
        moment, row = tables.now(), tables.Submission
        ready = or_(row.not_before.is_(None), row.not_before <= moment)
        with self.database.session() as db:
            def count(*where) -> int:
                return db.scalar(select(func.count()).select_from(row).where(*where))
            return (count(or_(row.state == tables.GRADING, (row.state == tables.QUEUED) & ready)),
                    count(row.state == tables.QUEUED, ~ready),
                    count(row.state == tables.FAILED))
