"""The submission service's database under parallel uploads, on SQLite (the default) and on a
PostgreSQL server the test starts (``classroom.service.LocalPostgres``; skipped, with the
reason, where PostgreSQL is not installed), with the README's ``--db postgresql://...`` URL and
what the requirements install (psycopg 3)."""
from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import create_engine, text

from autograder.service.db import Database
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
