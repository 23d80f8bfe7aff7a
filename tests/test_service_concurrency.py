"""The submission service's database under parallel uploads, on SQLite (the default) and on a
PostgreSQL server the test starts (``classroom.service.LocalPostgres``; skipped, with the
reason, where PostgreSQL is not installed), with the README's ``--db postgresql://...`` URL and
what the requirements install (psycopg 3); and the queue's rules, the database's lease and its
lock waits, on both, in the Database the service uses."""
from __future__ import annotations

import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from sqlalchemy import create_engine, text, update
from sqlalchemy.exc import OperationalError

from autograder.service.db import (BUSY_SECONDS, DONE, FAILED, MAX_TRIES, QUEUED, SET_ASIDE_SECONDS, STUDENT, Database,
                                   Person, Submission, as_utc, now, retry_pause)
from autograder.service.lease import DatabaseInUse, ServiceLease
from classroom.service import LocalPostgres, client, notebook_text, start_service, submit_notebook, wait_done

pytestmark = pytest.mark.slow  # runs kernels, the CLI, a server or a browser

ATTEMPTS, UPLOADS = 3, 12


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request):
    """None (the data folder's SQLite file), or the URL of a PostgreSQL server of the test's own."""
    if request.param == "sqlite":
        yield None
        return
    try:
        server = LocalPostgres()
    except (FileNotFoundError, RuntimeError) as err:
        pytest.skip(f"no PostgreSQL server for this test: {err}")
    yield server.url
    server.stop()


def test_attempts_per_day_hold_under_parallel_uploads(tmp_path, database):
    ctx = start_service(tmp_path, ("ann", "bob"), policies={"attempts_per_day": ATTEMPTS}, db=database)
    try:
        text_ = notebook_text(tmp_path, "ann")
        with ThreadPoolExecutor(UPLOADS) as pool:
            replies = list(pool.map(lambda _: submit_notebook(ctx.server, ctx.tokens["ann"], text_), range(UPLOADS)))
        codes = sorted(r.status_code for r in replies)
        assert codes == [202] * ATTEMPTS + [429] * (UPLOADS - ATTEMPTS), codes
        with client(ctx.server, ctx.tokens["ann"]) as http:
            accepted = [r.json()["id"] for r in replies if r.status_code == 202]
            assert sorted(s["id"] for s in http.get("/api/submissions").json()) == sorted(accepted)
            assert all(wait_done(http, i)["score"] == 8 for i in accepted)
    finally:
        ctx.server.stop()
    if database:  # the rows are in PostgreSQL, none in a SQLite file of the data folder
        with create_engine(Database(database).url).connect() as connection:
            graded = connection.execute(text("select gradings_started from submissions where state = 'done'")).all()
        assert sorted(g for (g,) in graded) == [1] * ATTEMPTS
        assert not (ctx.data / "service.db").exists()
    else:
        with sqlite3.connect(ctx.data / "service.db") as db:
            assert db.execute("select count(*) from submissions where gradings_started = 1 and state = 'done'"
                              ).fetchone() == (ATTEMPTS,)


# --------------------------------------------------------------------------
# the queue, the lease and the locks, in the database itself (no server: the Database as the service uses it)

def queue_in(database_url: str | None, tmp_path, people=("ann", "bob", "carl")) -> Database:
    """The service's Database on ``database_url`` (None: a SQLite file in ``tmp_path``), with ``people``."""
    database = Database(database_url or f"sqlite:///{tmp_path / 'service.db'}")
    database.issue_tokens([Person(id=p, role=STUDENT, name=p, email="", lms_id="") for p in people])
    return database


def add(database: Database, person: str, state: str = QUEUED, status: str | None = None) -> int:
    with database.writing.begin() as db:
        row = Submission(person_id=person, assignment="01-self-attention", notebook="self_attention",
                         filename="self_attention.ipynb", state=state, status=status)
        db.add(row)
        db.flush()
        return row.id


def row(database: Database, submission_id: int) -> Submission:
    with database.session() as db:
        return db.get(Submission, submission_id)


def make_due(database: Database, submission_id: int) -> None:
    """The pause after a failure of the grader's is over (as if its time had passed)."""
    with database.writing.begin() as db:
        db.get(Submission, submission_id).not_before = now() - timedelta(seconds=1)


def test_students_whose_last_notebook_timed_out_share_one_worker_fewer(tmp_path, database):
    queue = queue_in(database, tmp_path, ("ann", "bob", "carl"))
    for hanging in ("ann", "bob"):  # each one's last graded notebook timed out
        add(queue, hanging, DONE, "ok")
        add(queue, hanging, DONE, "timeout")
    add(queue, "carl", DONE, "timeout")
    add(queue, "carl", DONE, "ok")  # carl's last one did not: he is not in the lane
    ann, bob, carl = (add(queue, p) for p in ("ann", "bob", "carl"))
    lane = 1  # two workers: one for those who hang
    assert queue.claim_next(lane).id == ann
    assert queue.claim_next(lane).id == carl  # bob's waits: the lane is held by ann's
    assert queue.claim_next(lane) is None
    assert queue.claim_next(None).id == bob  # without a lane, nothing would have kept the last worker free


def test_the_graders_failures_are_retried_after_a_pause_and_set_aside_ones_come_back(tmp_path, database):
    queue = queue_in(database, tmp_path)
    sub = add(queue, "ann")
    for attempt in range(1, MAX_TRIES + 1):
        assert queue.claim_next().id == sub
        state = queue.give_back(sub, "BrokenProcessPool: a worker died")
        taken = row(queue, sub)
        pause = (as_utc(taken.not_before) - now()).total_seconds()
        if attempt < MAX_TRIES:
            assert state == QUEUED and "not counted as an attempt" in taken.reason
            assert retry_pause(attempt) - 5 < pause <= retry_pause(attempt), pause  # 10 s, then 20 s
            assert queue.claim_next() is None  # not before its pause is over
            make_due(queue, sub)
    assert state == FAILED and SET_ASIDE_SECONDS - 5 < pause <= SET_ASIDE_SECONDS
    assert "graded again by itself" in taken.reason
    assert queue.claim_next() is None
    make_due(queue, sub)  # set aside long enough: tried again without a restart, once
    assert queue.claim_next().id == sub
    assert queue.give_back(sub, "again") == FAILED


def test_a_notebook_the_service_cannot_read_is_put_back_untried_and_never_set_aside(tmp_path, database):
    queue = queue_in(database, tmp_path)
    sub = add(queue, "ann")
    pauses = []
    for _ in range(MAX_TRIES + 2):
        assert queue.claim_next().id == sub
        pauses.append(queue.put_back_unread(sub, "Permission denied: DATA/notebooks/1.ipynb"))
        taken = row(queue, sub)
        assert (taken.state, taken.gradings_started) == (QUEUED, 0)  # the try never reached the grader
        assert queue.claim_next() is None
        make_due(queue, sub)
    assert pauses == [retry_pause(n) for n in range(1, MAX_TRIES + 3)]  # 10, 20, 40, ... s
    assert str(tmp_path) not in taken.reason and "not counted as an attempt" in taken.reason


def test_a_second_service_on_the_database_is_refused_by_its_lease(tmp_path, database):
    first = queue_in(database, tmp_path)
    first.hold_lease(tmp_path / "data-1")
    second = Database(first.url)
    try:
        with pytest.raises(DatabaseInUse, match="another service .* data folder .*data-1"):
            second.hold_lease(tmp_path / "data-2")  # another folder, the same database
        # a service killed on this machine with this data folder (whose lock the new one holds): taken over at once
        third = Database(first.url)
        third.hold_lease(tmp_path / "data-1")
        first.lease.renew()
        assert not first.lease.held() and "another service took over" in first.lease.problem()
        third.release_lease()
        second.hold_lease(tmp_path / "data-2")  # released: free at once, from any folder
        # a holder that stops renewing (another machine, say) is free once its lease has expired
        with second.writing.begin() as db:
            db.execute(update(ServiceLease).values(host="elsewhere", expires=now() + timedelta(seconds=30)))
        with pytest.raises(DatabaseInUse, match="elsewhere"):
            Database(first.url).hold_lease(tmp_path / "data-3")
        with second.writing.begin() as db:
            db.execute(update(ServiceLease).values(expires=now() - timedelta(seconds=1)))
        fourth = Database(first.url)
        fourth.hold_lease(tmp_path / "data-3")
        fourth.release_lease()
    finally:
        for held in (first, second):
            held.release_lease()


def test_a_write_under_another_programs_lock_fails_within_seconds(tmp_path, database):
    """An upload (the person's lock, then the insert) while another program holds the lock: a
    failure within ``BUSY_SECONDS``, which the service answers 503 with Retry-After, not a wait of 30 s."""
    queue = queue_in(database, tmp_path)
    if database is None:
        other = sqlite3.connect(tmp_path / "service.db", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
    else:
        other = create_engine(queue.url).connect()
        other.execute(text("select id from people where id = 'ann' for update"))
    try:
        started = time.monotonic()
        with pytest.raises(OperationalError):
            with queue.writing.begin() as db:
                queue.lock_person(db, "ann")
                db.add(Submission(person_id="ann", assignment="a", notebook="n", filename="n.ipynb"))
        waited = time.monotonic() - started
        assert BUSY_SECONDS - 1 < waited < BUSY_SECONDS + 3, waited
    finally:
        other.rollback() if database else other.execute("ROLLBACK")
        other.close()
