"""The service's database: people and their tokens, web sessions, and submissions.

The submissions table is also the grading queue: a submission is ``queued`` when it is
accepted (its notebook already on disk), ``grading`` while a worker has it, and ``done`` once
its result is stored, in the same transaction that ends its grading. A service killed mid-run
leaves some rows ``grading`` with no result: they are queued again when it starts
(``requeue_interrupted``), so every accepted submission gets exactly one result.

SQLite (a file in the data folder) is the default; any SQLAlchemy URL works (PostgreSQL for
a course whose database lives on its own server).
"""
from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timezone

from sqlalchemy import (JSON, Boolean, DateTime, Float, ForeignKey, Integer, String, Text, create_engine, event,
                        select, update)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker

STUDENT, INSTRUCTOR = "student", "instructor"
QUEUED, GRADING, DONE = "queued", "grading", "done"


def now() -> datetime:
    return datetime.now(timezone.utc)


def as_utc(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes (what was stored was UTC)."""
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


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


class Database:
    def __init__(self, url: str):
        self.url = url
        sqlite = url.startswith("sqlite")
        self.engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30} if sqlite else {})
        if sqlite:
            @event.listens_for(self.engine, "connect")
            def _wal(connection, _record):  # readers do not wait for the grader's writes
                connection.execute("PRAGMA journal_mode=WAL")
        Base.metadata.create_all(self.engine)
        self.session = sessionmaker(self.engine, expire_on_commit=False)

    def person_by_token(self, token: str) -> Person | None:
        if not token:
            return None
        with self.session() as db:
            return db.scalar(select(Person).where(Person.token_hash == hash_secret(token)))

    def issue_tokens(self, people: list[Person], reissue: bool = False) -> dict[str, str]:
        """Add or update ``people``; returns id -> new token for each one given a token now (those
        without one, or everyone with ``reissue``: their old tokens stop working)."""
        issued = {}
        with self.session.begin() as db:
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
        """Submissions a killed service was grading go back to the queue (they have no result)."""
        with self.session.begin() as db:
            return db.execute(update(Submission).where(Submission.state == GRADING).values(state=QUEUED)).rowcount

    def claim_next(self) -> Submission | None:
        """The oldest queued submission, now ``grading`` (threads of one service take turns)."""
        with self.session.begin() as db:
            sub = db.scalar(select(Submission).where(Submission.state == QUEUED).order_by(Submission.id)
                            .limit(1).with_for_update(skip_locked=True))  # PostgreSQL: several services
            if sub is not None:
                sub.state = GRADING
                sub.gradings_started += 1
            return sub
