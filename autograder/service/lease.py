"""One service per database: a lease held in the database itself.

The data folder's lock (``Storage.lock``) keeps a second service off the same folder, but two
services with folders of their own (two machines, or one started with another ``--data``) may
name the same PostgreSQL database, or the same SQLite file: the second would queue again what
the first is grading (``requeue_interrupted``) and grade it twice, and it could not read the
notebooks the first one stored. So the service takes the database's lease before it changes
anything: a row (``service_lease``) with its holder, its machine, process and data folder, and
an expiry that a heartbeat thread moves on every ``HEARTBEAT_SECONDS``. A second service finds
the row held and refuses to start (``DatabaseInUse``: one line, exit status 2).

A lease is free when it expired (its holder stopped renewing it ``LEASE_SECONDS`` ago, by the
database's clock, which every machine shares), or when its holder is on this machine and is
known to be gone: it held this same data folder (whose lock this service now holds, so that
process ended) or its process no longer exists. A service killed without a word is thus
replaced at once on its own machine, and after ``LEASE_SECONDS`` from another; one stopped
(SIGTERM, or ``Grader.stop``) gives its lease back, and the next one starts at once, from anywhere.

A holder that could not renew its lease for ``LEASE_SECONDS`` (the database unreachable), or
finds it taken, claims no submission (``held`` is False) and says so on ``/health``.
"""
from __future__ import annotations

import os
import signal
import socket
import threading
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import DateTime, Integer, String, Text, delete, func, select, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Mapped, mapped_column

from autograder.errors import InputError

from .db import Base, as_utc, one_line

LEASE_SECONDS = 60
HEARTBEAT_SECONDS = 10
NAME = "grading"  # the one lease: the queue's


class DatabaseInUse(InputError):
    """Another service holds the database."""


class ServiceLease(Base):
    __tablename__ = "service_lease"

    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    holder: Mapped[str] = mapped_column(String(64))  # one service's run: a random id
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    data_folder: Mapped[str] = mapped_column(Text)
    renewed: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    expires: Mapped[datetime] = mapped_column(DateTime(timezone=True))


def database_clock(db) -> datetime:
    """The database's time (PostgreSQL's server; SQLite's is this machine's), in UTC."""
    return as_utc(db.scalar(select(func.now())))


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


class DatabaseLease:
    table = ServiceLease.__table__

    def __init__(self, database, data_folder: Path):
        self.database = database
        self.holder, self.host, self.pid = uuid.uuid4().hex, socket.gethostname(), os.getpid()
        self.data_folder = str(Path(data_folder).resolve())
        self.renewed_at = None  # time.monotonic() of the last renewal that succeeded
        self.lost: str | None = None  # why this service no longer holds it, once it does not
        self.trouble: str | None = None  # the last renewal's failure, until one succeeds
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._renew_until_stopped, name="database-lease", daemon=True)

    def acquire(self) -> None:
        """Take the lease, or raise DatabaseInUse naming its holder; then keep renewing it."""
        for _ in range(2):  # two services that both found no row: the second insert fails, and looks again
            try:
                with self.database.writing.begin() as db:
                    clock = database_clock(db)
                    row = db.get(ServiceLease, NAME, with_for_update=True)
                    if row is not None and row.holder != self.holder and not self._gone(row, clock):
                        raise DatabaseInUse(self._refusal(row, clock))
                    if row is None:
                        row = ServiceLease(name=NAME)
                        db.add(row)
                    row.holder, row.host, row.pid, row.data_folder = self.holder, self.host, self.pid, self.data_folder
                    row.renewed, row.expires = clock, clock + timedelta(seconds=LEASE_SECONDS)
                break
            except IntegrityError:
                continue
        else:
            raise DatabaseInUse("another service took the database's lease at the same moment as this one")
        self.renewed_at = time.monotonic()
        self.thread.start()
        if threading.current_thread() is threading.main_thread():  # where signal handlers are set
            self._release_on_sigterm()

    def _release_on_sigterm(self) -> None:
        """A service stopped by SIGTERM (systemd, a batch system; uvicorn passes the signal on once it
        has shut down) gives its lease back, then ends as the signal ends it."""
        before = signal.getsignal(signal.SIGTERM)
        if before is signal.SIG_IGN:  # a process that outlives SIGTERM keeps its lease
            return

        def release_then_end(signum, frame):
            self.release()
            if callable(before):
                before(signum, frame)
            else:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)
        signal.signal(signal.SIGTERM, release_then_end)

    def _gone(self, row: ServiceLease, clock: datetime) -> bool:
        if as_utc(row.expires) <= clock:
            return True
        if row.host != self.host:
            return False
        return row.data_folder == self.data_folder or not _process_exists(row.pid)

    def _refusal(self, row: ServiceLease, clock: datetime) -> str:
        where = self.database.engine.url.render_as_string(hide_password=True)
        ago = max(0.0, (clock - as_utc(row.renewed)).total_seconds())
        return (f"another service (process {row.pid} on {row.host}, data folder {row.data_folder}) holds the "
                f"database {where} (its lease renewed {ago:.0f} s ago, free {LEASE_SECONDS} s after it stops): "
                "stop it first, or give this one a database of its own (--db)")

    def held(self) -> bool:
        """Whether this service may claim submissions: its lease renewed within ``LEASE_SECONDS``."""
        return self.lost is None and self.renewed_at is not None and \
            time.monotonic() - self.renewed_at < LEASE_SECONDS

    def problem(self) -> str | None:
        """What ``/health`` says about the lease, or None while it is held and renewed."""
        if self.lost:
            return self.lost
        if not self.held():
            return (f"this service's lease on the database has not been renewed for {LEASE_SECONDS} s "
                    f"({self.trouble or 'no reason given'}): it grades nothing until it is")
        return f"renewing the database lease failed: {self.trouble}" if self.trouble else None

    def renew(self) -> None:
        """Move the expiry on; a row that names another holder now means the lease was taken over."""
        try:
            with self.database.writing.begin() as db:
                clock = database_clock(db)
                renewed = db.execute(update(ServiceLease).where(ServiceLease.name == NAME,
                                                                ServiceLease.holder == self.holder)
                                     .values(renewed=clock, expires=clock + timedelta(seconds=LEASE_SECONDS)))
        except SQLAlchemyError as err:
            self.trouble = one_line(err)
            return
        self.trouble = None
        if renewed.rowcount:
            self.renewed_at = time.monotonic()
        else:
            self.lost = ("another service took over this database's lease (this one could not renew it in time): "
                         "this service grades nothing more; stop one of the two")

    def _renew_until_stopped(self) -> None:
        while not self.stopping.wait(HEARTBEAT_SECONDS) and not self.lost:
            self.renew()

    def release(self) -> None:
        """A service that stops gives the lease back: the next one starts at once, from anywhere."""
        self.stopping.set()
        try:
            with self.database.writing.begin() as db:
                db.execute(delete(ServiceLease).where(ServiceLease.name == NAME, ServiceLease.holder == self.holder))
        except SQLAlchemyError:  # the database gone: the lease expires by itself
            pass
