"""The service's database: people and their tokens, web sessions, and submissions.

The submissions table is also the grading queue: a submission is ``queued`` when it is
accepted (its notebook already on disk), ``grading`` while a worker has it, and ``done`` once
its result is stored, in the same transaction that ends its grading. A service killed mid-run
leaves some rows ``grading`` with no result: they are queued again when it starts
(``requeue_interrupted``), so every accepted submission gets exactly one result. A grading
that the grader itself failed (a worker killed, the Dask scheduler lost, a full disk) is queued
again too, not before a pause that doubles with each failure (``not_before``), up to
``MAX_TRIES`` times; then the row is ``failed``, set aside: no result, and not an attempt, tried
again by itself after ``SET_ASIDE_SECONDS`` (and at the next start). A notebook the service
cannot read back from its own storage never reached the grader: it is queued again with the
same pause, and that try does not count (``put_back_unread``).

Who goes first: each student has at most one submission ``grading`` at a time, and the queue
takes students in turns (each one's oldest waiting submission, then each one's second...), so a
student who sends many delays only their own. Students whose last graded notebook timed out
share a lane of at most ``lane`` gradings at once (``claim_next``; the Grader makes it one
worker fewer than it has): however many of them send hanging notebooks, one worker is left for
everyone else.

SQLite (a file in the data folder) is the default; any SQLAlchemy URL works (PostgreSQL for
a course whose database lives on its own server).
"""
from __future__ import annotations

import glob
import hashlib
import importlib.util
import os
import secrets
import sqlite3
from datetime import datetime, timedelta, timezone

from sqlalchemy import (JSON, Boolean, DateTime, Float, ForeignKey, Integer, String, Text, UniqueConstraint,
                        create_engine, event, func, inspect, make_url, or_, select, text, update)
from sqlalchemy.orm import DeclarativeBase, Mapped, aliased, mapped_column, sessionmaker

STUDENT, INSTRUCTOR = "student", "instructor"
QUEUED, GRADING, DONE, FAILED = "queued", "grading", "done", "failed"
MAX_TRIES = 3  # gradings the grader itself may fail before a submission is set aside as 'failed'
RETRY_PAUSE_SECONDS = 10  # after the grader's first failure with a submission; doubled at each next one
MAX_RETRY_PAUSE_SECONDS = 600
SET_ASIDE_SECONDS = 600  # a submission set aside is tried again by itself after this (once each time)
# How long a statement waits for a lock another program holds (SQLite's write lock, a PostgreSQL
# row lock) before it fails: an upload is then a 503 with Retry-After within seconds, and a
# grading thread tries again after its own pause.
BUSY_SECONDS = 5


def now() -> datetime:
    return datetime.now(timezone.utc)


def as_utc(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes (what was stored was UTC)."""
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def retry_pause(failures: int) -> float:
    """Seconds before a submission the grader failed ``failures`` times is tried again."""
    return min(MAX_RETRY_PAUSE_SECONDS, RETRY_PAUSE_SECONDS * 2 ** (max(1, failures) - 1))


def one_line(err: BaseException) -> str:
    """An exception's first line, for a log line or a reply: the database driver's own error for
    SQLAlchemy's, which wrap it with the statement, a link and advice about autoflush."""
    err = getattr(err, "orig", None) or err
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:300]


def hash_secret(secret: str) -> str:
    """Tokens and session ids are 256-bit random strings, never passwords people choose: one
    SHA-256 is enough to make a stolen database useless for logging in (no slow hash needed)."""
    return hashlib.sha256(secret.encode()).hexdigest()


def new_secret() -> str:
    """256 random bits as hex: a base64 alphabet would start one token in 64 with ``-``, which
    every CSV the tool writes (tokens.csv included) prefixes with ``'`` so that a spreadsheet
    shows it as text (``report.spreadsheet_cell``), and the token handed out would not work."""
    return secrets.token_hex(32)


class Base(DeclarativeBase):
    pass


class Person(Base):
    __tablename__ = "people"

    id: Mapped[str] = mapped_column(String(200), primary_key=True)  # the student id of the roster
    role: Mapped[str] = mapped_column(String(20), default=STUDENT)
    name: Mapped[str] = mapped_column(String(200), default="")
    email: Mapped[str] = mapped_column(String(200), default="")
    lms_id: Mapped[str] = mapped_column(String(200), default="")
    token_hash: Mapped[str | None] = mapped_column(String(64), unique=True, index=True)


class WebSession(Base):
    """A browser's login: the cookie holds the session id, the forms its CSRF token."""

    __tablename__ = "web_sessions"

    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    person_id: Mapped[str] = mapped_column(ForeignKey("people.id"))
    csrf_token: Mapped[str] = mapped_column(String(64))
    created: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=now)


class Submission(Base):
    __tablename__ = "submissions"
    __table_args__ = (UniqueConstraint("person_id", "idempotency_key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    person_id: Mapped[str] = mapped_column(ForeignKey("people.id"), index=True)
    assignment: Mapped[str] = mapped_column(String(200), index=True)
    notebook: Mapped[str] = mapped_column(String(200))  # the assignment's notebook name (no .ipynb)
    filename: Mapped[str] = mapped_column(String(300))  # as the student's browser or kernel named it
    received: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=now)
    late: Mapped[bool] = mapped_column(Boolean, default=False)
    state: Mapped[str] = mapped_column(String(20), default=QUEUED, index=True)
    gradings_started: Mapped[int] = mapped_column(Integer, default=0)  # >1 only after an interrupted grading
    graded: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    status: Mapped[str | None] = mapped_column(String(20))  # the grader's: ok, timeout, error, invalid
    score: Mapped[float | None] = mapped_column(Float)
    max_score: Mapped[float | None] = mapped_column(Float)
    result: Mapped[dict | None] = mapped_column(JSON)  # NotebookResult.to_json()
    reason: Mapped[str] = mapped_column(Text, default="")
    # the client's key for one upload (attention_checks.submit sends one): the same key again is
    # the same submission, not a new attempt
    idempotency_key: Mapped[str | None] = mapped_column(String(64))
    # the grader's own failures with this submission (never the notebook's), and the moment before
    # which it is not tried again (a pause that doubles with each failure)
    grader_failures: Mapped[int | None] = mapped_column(Integer, default=0)
    not_before: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


def _driver(url: str) -> str:
    """``postgresql://`` is psycopg2 to SQLAlchemy 2; the requirements install psycopg 3, so the
    documentation's URL (docs/instructors/service.md) is read as ``postgresql+psycopg://`` where psycopg2 is not installed."""
    parsed = make_url(url)
    if parsed.drivername == "postgresql" and importlib.util.find_spec("psycopg2") is None:
        return parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
    return url


class Database:
    def __init__(self, url: str):
        self.url = url = _driver(url)
        self.sqlite = url.startswith("sqlite")
        self.engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": BUSY_SECONDS}
                                    if self.sqlite else _postgres_waits(url), pool_pre_ping=not self.sqlite,
                                    pool_timeout=BUSY_SECONDS)
        if self.sqlite:
            _sqlite_transactions(self.engine)
        Base.metadata.create_all(self.engine)
        _add_missing_columns(self.engine)
        if self.sqlite and self.engine.url.database:  # students' results and the tokens' hashes: the owner's only
            for path in glob.glob(glob.escape(self.engine.url.database) + "*"):
                os.chmod(path, 0o600)
        self.session = sessionmaker(self.engine, expire_on_commit=False)
        # a transaction that takes SQLite's write lock when it begins (PostgreSQL: the rows it locks)
        self.writing = sessionmaker(self.engine.execution_options(immediate=True), expire_on_commit=False)
        self.lease = None  # hold_lease: this service's claim on the database

    def hold_lease(self, data_folder) -> None:
        """Hold the database for this service as long as it runs (``lease.DatabaseLease``): a second
        service on the same database, whatever its data folder or machine, is refused
        (``DatabaseInUse``, an InputError: one line and exit status 2)."""
        from .lease import DatabaseLease

        DatabaseLease.table.create(self.engine, checkfirst=True)  # a database made before there was a lease
        self.lease = DatabaseLease(self, data_folder)
        self.lease.acquire()

    def release_lease(self) -> None:
        if self.lease is not None:
            self.lease.release()

    def write_blocked(self, wait: float = 0.5) -> str | None:
        """Why nothing can be written now (another program holds SQLite's write lock), or None:
        what ``/health`` says while uploads and gradings wait for the lock, before they fail."""
        if not self.sqlite or not self.engine.url.database:
            return None  # PostgreSQL locks rows, not the database: its failures show as the graders' own
        probe = sqlite3.connect(self.engine.url.database, timeout=wait, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return None
        except sqlite3.OperationalError as err:
            return f"the database cannot be written: {err} (another program holds its write lock?)"
        finally:
            probe.close()

    def lock_person(self, db, person_id: str) -> None:
        """Until ``db`` commits, no other transaction of this person's gets past here: PostgreSQL
        locks the person's row; SQLite's ``writing`` transactions hold the database's write lock."""
        db.execute(select(Person.id).where(Person.id == person_id).with_for_update())

    def attempts_since(self, db, person_id: str, assignment: str, since: datetime) -> int:
        """Submissions that count as attempts: all but those the grader failed."""
        return db.scalar(select(func.count()).select_from(Submission).where(
            Submission.person_id == person_id, Submission.assignment == assignment, Submission.received >= since,
            Submission.state != FAILED))

    def person_by_token(self, token: str) -> Person | None:
        if not token:
            return None
        with self.session() as db:
            return db.scalar(select(Person).where(Person.token_hash == hash_secret(token)))

    def issue_tokens(self, people: list[Person], reissue: bool = False) -> dict[str, str]:
        """Add or update ``people``; returns id -> new token for each one given a token now (those
        without one, or everyone with ``reissue``: their old tokens stop working)."""
        issued = {}
        with self.writing.begin() as db:
            for person in people:
                known = db.get(Person, person.id)
                if known is None:
                    known = db.merge(person)
                else:
                    known.name, known.email, known.lms_id = person.name or "", person.email or "", person.lms_id or ""
                    known.role = person.role
                if known.token_hash is None or reissue:
                    issued[person.id] = new_secret()
                    known.token_hash = hash_secret(issued[person.id])
        return issued

    def requeue_interrupted(self) -> int:
        """Submissions a killed service was grading go back to the queue (they have no result), and
        those the grader failed ``MAX_TRIES`` times get as many tries again, at once."""
        with self.writing.begin() as db:
            interrupted = db.execute(update(Submission).where(Submission.state == GRADING)
                                     .values(state=QUEUED)).rowcount
            failed = db.execute(update(Submission).where(Submission.state == FAILED)
                                .values(state=QUEUED, gradings_started=0, not_before=None)).rowcount
            return interrupted + failed

    def claim_next(self, lane: int | None = None) -> Submission | None:
        """The next submission in the fair order (the module's docstring), now ``grading``; None
        when every waiting submission's student already has one being graded, or waits for its
        pause after a failure of the grader's. ``lane``: at most that many gradings at once of
        students whose last graded notebook timed out (None: no limit)."""
        moment = now()
        with self.writing.begin() as db:
            # the set-aside whose pause is over: one more try each (a failure sets it aside again)
            db.execute(update(Submission).where(Submission.state == FAILED, Submission.not_before <= moment)
                       .values(state=QUEUED, gradings_started=MAX_TRIES - 1))
            busy = select(Submission.person_id).where(Submission.state == GRADING)
            ready = [Submission.state == QUEUED, Submission.person_id.not_in(busy),
                     or_(Submission.not_before.is_(None), Submission.not_before <= moment)]
            if lane is not None:
                hanging = _last_timed_out()
                held = db.scalar(select(func.count()).select_from(Submission).where(
                    Submission.state == GRADING, Submission.person_id.in_(hanging)))
                if held >= lane:
                    ready.append(Submission.person_id.not_in(hanging))
            turn = func.row_number().over(partition_by=Submission.person_id, order_by=Submission.id)
            waiting = select(Submission.id, turn.label("turn")).where(*ready).subquery()
            for (candidate,) in db.execute(select(waiting.c.id).order_by(waiting.c.turn, waiting.c.id).limit(8)):
                # claimed only if still queued: another thread (or service, on PostgreSQL) may have taken it
                if db.execute(update(Submission).where(Submission.id == candidate, Submission.state == QUEUED)
                              .values(state=GRADING, gradings_started=Submission.gradings_started + 1)).rowcount:
                    return db.get(Submission, candidate)
            return None

    def give_back(self, submission_id: int, reason: str) -> str:
        """A grading the grader failed: queued again after a pause, or after ``MAX_TRIES`` set aside
        as ``failed`` (no result, no attempt) until ``SET_ASIDE_SECONDS`` have passed. Returns the
        new state."""
        with self.writing.begin() as db:
            row = db.get(Submission, submission_id)
            if row is None or row.state != GRADING:
                return row.state if row else ""
            row.grader_failures = (row.grader_failures or 0) + 1
            if row.gradings_started >= MAX_TRIES:
                row.state, row.not_before = FAILED, now() + timedelta(seconds=SET_ASIDE_SECONDS)
                row.reason = (f"the grader failed {row.gradings_started} times ({reason}); this is not counted as "
                              f"an attempt, and it is graded again by itself after {row.not_before:%H:%M} UTC "
                              "(or when the service restarts)")
            else:
                row.state, row.not_before = QUEUED, now() + timedelta(seconds=retry_pause(row.grader_failures))
                row.reason = (f"the grader failed on its side ({reason}); it tries again by itself after "
                              f"{row.not_before:%H:%M:%S} UTC; this is not counted as an attempt")
            return row.state

    def put_back_unread(self, submission_id: int, reason: str) -> float:
        """A claimed submission whose notebook the service could not read back from its own storage:
        queued again after a pause, and the try not counted (the notebook never reached the grader),
        so it is never set aside for it. Returns the pause in seconds."""
        with self.writing.begin() as db:
            row = db.get(Submission, submission_id)
            if row is None or row.state != GRADING:
                return 0.0
            row.grader_failures = (row.grader_failures or 0) + 1
            pause = retry_pause(row.grader_failures)
            row.state, row.gradings_started = QUEUED, max(0, row.gradings_started - 1)
            row.not_before = now() + timedelta(seconds=pause)
            row.reason = (f"the service could not read its copy of the notebook ({reason}); it tries again by "
                          f"itself after {row.not_before:%H:%M:%S} UTC; this is not counted as an attempt")
            return pause


def _last_timed_out():
    """The students whose last graded notebook timed out (a subquery of their ids)."""
    last, later = aliased(Submission), aliased(Submission)  # aliases: never correlated with the outer query
    return select(last.person_id).where(
        last.state == DONE, last.status == "timeout",
        ~select(later.id).where(later.person_id == last.person_id, later.state == DONE, later.id > last.id).exists())


def _postgres_waits(url: str) -> dict:
    """A PostgreSQL connection's statements wait at most ``BUSY_SECONDS`` for a lock (psycopg and
    psycopg2 pass libpq's ``options``); other servers' drivers are left as they are."""
    return {"options": f"-c lock_timeout={BUSY_SECONDS * 1000}"} if make_url(url).get_backend_name() == \
        "postgresql" else {}


def _sqlite_transactions(engine) -> None:
    """SQLite in WAL mode (readers do not wait for the grader's writes), its transactions begun by
    SQLAlchemy (pysqlite would begin one only at the first write, after the reads that decide it),
    ``BEGIN IMMEDIATE`` for the ``writing`` ones: the count of today's attempts and the insert
    that follows it are one step, whoever else submits at the same moment."""
    @event.listens_for(engine, "connect")
    def _connect(connection, _record):
        connection.isolation_level = None
        connection.execute("PRAGMA journal_mode=WAL")

    @event.listens_for(engine, "begin")
    def _begin(connection):
        connection.exec_driver_sql("BEGIN IMMEDIATE" if connection.get_execution_options().get("immediate")
                                   else "BEGIN")


def _add_missing_columns(engine) -> None:
    """A data folder from an earlier version: the columns added since (all may be NULL)."""
    present = {c["name"] for c in inspect(engine).get_columns(Submission.__tablename__)}
    with engine.begin() as connection:
        for column in Submission.__table__.columns:
            if column.name not in present and column.nullable:
                connection.execute(text(f"ALTER TABLE {Submission.__tablename__} ADD COLUMN {column.name} "
                                        f"{column.type.compile(engine.dialect)}"))
