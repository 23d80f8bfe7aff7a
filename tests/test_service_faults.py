"""The submission service under the faults an instructor meets, injected into a real server on a
port: the database locked by another writer, a data folder that cannot be written, a grading
worker killed, a hanging notebook, a second service on the same data folder, hostile requests.
The service must grade every accepted submission once, charge no student for its own failure,
refuse with a 4xx or 503 and a reason, and say on ``/health`` what is wrong while it is."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text, update

from autograder.results import NotebookResult
from autograder.service.db import (BUSY_SECONDS, DONE, GRADING, MAX_TRIES, QUEUED, RETRY_PAUSE_SECONDS, Database,
                                   Submission)
from autograder.service.grading import Grader
from autograder.service.lease import ServiceLease
from autograder.service.storage import Storage
from classroom import REPO
from classroom.service import (Server, client, course_source, log_in, notebook_text, start_service as started,
                               submit_notebook, wait_done)
from test_service_concurrency import add, database, make_due, queue_in, row  # noqa: F401 - database: the fixture

pytestmark = pytest.mark.slow  # runs kernels, the CLI, a server or a browser

HANG = {"attention_scores": "import time\ntime.sleep(3600)\n"}  # a notebook that never finishes a cell


def health(server: Server) -> tuple[int, dict]:
    reply = httpx.get(f"{server.url}/health", timeout=60)
    return reply.status_code, reply.json()


def wait_unhealthy(server: Server, words: str, timeout: float = 180) -> dict:
    """Until ``/health`` is 503 with a problem that says ``words``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, said = health(server)
        if status == 503 and any(words in problem for problem in said["problems"]):
            return said
        time.sleep(1)
    raise TimeoutError(f"/health never said {words!r}: {said}")


def rows(data) -> dict[int, tuple]:
    with sqlite3.connect(data / "service.db") as database:
        return {r[0]: r[1:] for r in database.execute(
            "select id, person_id, state, gradings_started, score from submissions")}


def timed(action, *args):
    started_at = time.monotonic()
    done = action(*args)
    return time.monotonic() - started_at, done


def assert_quiet_log(server: Server) -> None:
    log = server.log.read_text()
    assert "Traceback" not in log, log


# --------------------------------------------------------------------------
# in process: the Grader and /health's check on SQLite and PostgreSQL, with an engine of the test's

FEEDBACK = "<html>feedback</html>"


class ScriptedEngine:
    """An engine that grades every notebook 8 of 10 at once, with the feedback pages the test
    gives in turn (None: nbgrader graded it but wrote no page; a page once they are used up), in
    place of kernels; the notebooks of the students in ``hanging`` hang until ``released``."""

    slots = 2

    def __init__(self, pages: list[str | None]):
        self.pages, self.seen = pages, []
        self.hanging, self.released = set(), threading.Event()

    def connect(self) -> None:
        pass

    def problem(self) -> None:
        return None

    def close(self) -> None:
        pass

    def grade(self, submission, notebook: bytes):
        self.seen.append(notebook)
        if submission.student_id in self.hanging:
            self.released.wait(timeout=60)
        result = NotebookResult(submission.student_id, submission.assignment, submission.notebook, "ok", 8, 10,
                                autograded=notebook.decode())
        return [(result, self.pages.pop(0) if self.pages else FEEDBACK)]


@pytest.fixture
def grader(tmp_path, database):
    """A Grader (its threads started) on the test's database and a data folder in tmp_path, with a
    ScriptedEngine whose pages the test sets; stopped at the end."""
    queue = queue_in(database, tmp_path)
    made = Grader(queue, Storage(tmp_path / "data"), None, ScriptedEngine([]))
    made.start()
    yield made
    made.stop()


NOTEBOOK = b'{"cells": []}'


def upload(grader: Grader, stored: bool = True, person: str = "ann") -> int:
    """As the service stores an upload: the notebook on disk (unless not ``stored``: as if another
    data folder held it), then the row queued."""
    sub = add(grader.database, person, state="receiving")
    if stored:
        grader.storage.save_notebook(sub, NOTEBOOK)
    with grader.database.writing.begin() as db:
        db.get(Submission, sub).state = QUEUED
    grader.notify()
    return sub


def wait_for(what, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while not (found := what()):
        assert time.monotonic() < deadline, f"not in {timeout} s"
        time.sleep(0.1)
    return found


def answer(grader: Grader) -> tuple[int, dict, float]:
    """/health's answer (status, body) and how long it took."""
    started_at = time.monotonic()
    reply = grader.health.answer(["01-self-attention"], 1024**2)
    return reply.status_code, json.loads(reply.body), time.monotonic() - started_at


def test_a_stored_notebook_that_cannot_be_read_is_retried_never_the_students(grader):
    sub = upload(grader, stored=False)
    taken = wait_for(lambda: (r := row(grader.database, sub)).grader_failures and r)
    assert (taken.state, taken.gradings_started, taken.status) == (QUEUED, 0, None)  # no try used, no result
    assert f"No such file or directory: DATA/notebooks/{sub}.ipynb" in taken.reason, taken.reason
    assert str(grader.storage.root) not in taken.reason and "not counted as an attempt" in taken.reason
    wait_for(lambda: answer(grader)[1]["retrying"] == 1)
    grader.storage.save_notebook(sub, NOTEBOOK)  # the folder readable again
    make_due(grader.database, sub)
    graded = wait_for(lambda: (r := row(grader.database, sub)).state == DONE and r)
    assert (graded.status, graded.score, graded.gradings_started) == ("ok", 8, 1)
    assert grader.engine.seen == [NOTEBOOK]  # the engine got the notebook's bytes, once


def test_a_graded_notebook_without_its_feedback_page_is_graded_again(grader):
    grader.engine.pages += [None]
    sub = upload(grader)
    taken = wait_for(lambda: (r := row(grader.database, sub)).grader_failures and r)
    assert taken.state == QUEUED and "no feedback page" in taken.reason, taken.reason
    make_due(grader.database, sub)
    wait_for(lambda: row(grader.database, sub).state == DONE)
    assert grader.storage.feedback(sub).read_text() == FEEDBACK
    # one stored without its page before (an earlier version, a page lost): counted and named
    grader.storage.feedback(sub).unlink()
    said = wait_for(lambda: (a := answer(grader)[1])["without_feedback"] and a)
    assert (said["without_feedback"], said["without_feedback_ids"]) == (1, [sub])


def test_students_whose_last_notebook_timed_out_never_hold_every_worker(grader):
    """Two workers; ann's and bob's last notebooks timed out and their new ones hang: one of them
    is graded at a time, and carl's takes the other worker at once."""
    for student in ("ann", "bob"):
        add(grader.database, student, DONE, "timeout")
    grader.engine.hanging |= {"ann", "bob"}
    ann, bob = upload(grader, person="ann"), upload(grader, person="bob")
    wait_for(lambda: row(grader.database, ann).state == GRADING)
    carl = upload(grader, person="carl")
    wait_for(lambda: row(grader.database, carl).state == DONE)
    assert (row(grader.database, bob).state, row(grader.database, bob).gradings_started) == (QUEUED, 0)
    grader.engine.released.set()
    wait_for(lambda: row(grader.database, bob).state == DONE)


def test_a_service_whose_lease_was_taken_over_grades_nothing_more(grader, tmp_path):
    grader.database.hold_lease(tmp_path / "data")
    with grader.database.writing.begin() as db:  # another service took it while this one could not renew it
        db.execute(update(ServiceLease).values(holder="another service"))
    grader.database.lease.renew()
    time.sleep(2.5)  # a look at the queue that began before the loss ends (the threads look every 2 s)
    sub = upload(grader)
    said = wait_for(lambda: (a := answer(grader))[0] == 503 and a[1])
    assert any("another service took over" in problem for problem in said["problems"]), said
    time.sleep(3)  # the grading threads' next looks at the queue
    assert (row(grader.database, sub).state, row(grader.database, sub).gradings_started) == (QUEUED, 0)


def test_health_answers_at_once_under_a_database_lock(grader, database):
    assert answer(grader)[0] == 200
    if database is None:
        other = sqlite3.connect(grader.database.engine.url.database, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        words = "database is locked"
    else:  # an exclusive lock on the queue's table: even its readers wait
        other = create_engine(grader.database.url).connect()
        other.execute(text("lock table submissions in access exclusive mode"))
        words = "the database cannot be read"
    try:
        def locked() -> bool:
            status, said, took = answer(grader)
            assert took < 0.5, took  # the last check's answer: never a wait for the lock
            return status == 503 and any(words in p for p in said["problems"])
        wait_for(locked, timeout=BUSY_SECONDS + 10)
    finally:
        other.rollback() if database else other.execute("ROLLBACK")
        other.close()
    wait_for(lambda: answer(grader)[0] == 200)


# --------------------------------------------------------------------------
# the grader survives the database and the disk


def test_a_locked_database_is_waited_out_and_health_says_so(tmp_path):
    ctx = started(tmp_path)
    try:
        first = submit_notebook(ctx.server, ctx.tokens["ann"], notebook_text(tmp_path, "ann"))
        assert first.status_code == 202, first.text
        # another writer (a backup, an sqlite3 shell) holds the database's write lock for longer
        # than SQLite's 30 s wait, while ann's notebook is graded and bob uploads
        lock = sqlite3.connect(ctx.data / "service.db", isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")
        try:
            with ThreadPoolExecutor(1) as pool:
                during = pool.submit(timed, submit_notebook, ctx.server, ctx.tokens["bob"],
                                     notebook_text(tmp_path, "bob"))
                said = wait_unhealthy(ctx.server, "database is locked")
                assert not said["ok"]
                answered_in, _ = timed(health, ctx.server)
                assert answered_in < 1, answered_in  # /health answers from its last check, without waiting
                waited, refused = during.result()
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        assert refused.status_code == 503 and "database" in refused.json()["detail"]
        assert refused.headers["retry-after"]
        assert waited < BUSY_SECONDS + 5, waited  # bounded: not SQLite's 30 s of old
        assert ctx.server.wait_healthy()["ok"]  # the grading threads carried on by themselves
        with client(ctx.server, ctx.tokens["ann"]) as http:
            view = wait_done(http, first.json()["id"])
            assert (view["status"], view["score"]) == ("ok", 8)
        with client(ctx.server, ctx.tokens["bob"]) as http:  # nothing half-stored, no attempt used
            assert http.get("/api/submissions").json() == []
    finally:
        ctx.server.stop()
    assert [r[2] for r in rows(ctx.data).values()] == [1]  # graded once
    assert_quiet_log(ctx.server)


def test_a_data_folder_that_cannot_be_written_or_read_is_retried_and_uploads_get_503(tmp_path):
    ctx = started(tmp_path, ("ann", "bob", "carl"))
    feedback, notebooks = ctx.data / "feedback", ctx.data / "notebooks"
    try:
        feedback.rename(ctx.data / "feedback-away")  # where the grader writes: now a file (a full disk's OSError)
        feedback.write_text("in the way")
        first = submit_notebook(ctx.server, ctx.tokens["ann"], notebook_text(tmp_path, "ann"))
        assert first.status_code == 202, first.text
        said = wait_unhealthy(ctx.server, f"storing the result of submission {first.json()['id']}")
        assert any("Not a directory: DATA/feedback/" in problem for problem in said["problems"]), said
        # bob's waits while the one grading thread holds ann's result; then his stored notebook
        # cannot be read (its folder a file), and no upload can be stored
        second = submit_notebook(ctx.server, ctx.tokens["bob"], notebook_text(tmp_path, "bob"))
        assert second.status_code == 202, second.text
        notebooks.rename(ctx.data / "notebooks-away")
        notebooks.write_text("in the way")
        refused = submit_notebook(ctx.server, ctx.tokens["carl"], notebook_text(tmp_path, "carl"))
        assert refused.status_code == 503 and "data folder" in refused.json()["detail"], refused.text
        said = wait_unhealthy(ctx.server, "the data folder cannot be written: DATA/notebooks: Not a directory")
        feedback.unlink()
        (ctx.data / "feedback-away").rename(feedback)
        with client(ctx.server, ctx.tokens["bob"]) as http:  # put back untried: the service's failure, not bob's
            bob = f"/api/submissions/{second.json()['id']}"
            view = wait_for(lambda: "could not read" in (v := http.get(bob).json())["reason"] and v, timeout=300)
        assert view["state"] == "queued" and "not counted as an attempt" in view["reason"], view
        assert str(tmp_path) not in json.dumps(view) + json.dumps(said), (view, said)  # no server path, anywhere
        notebooks.unlink()
        (ctx.data / "notebooks-away").rename(notebooks)
        assert ctx.server.wait_healthy()["ok"]
        with client(ctx.server, ctx.tokens["ann"]) as http:
            view = wait_done(http, first.json()["id"])
            assert view["score"] == 8 and http.get(view["feedback_url"]).status_code == 200
        with client(ctx.server, ctx.tokens["bob"]) as http:
            assert (wait_done(http, second.json()["id"])["status"], wait_done(http, second.json()["id"])["score"]) \
                == ("ok", 8)
        with client(ctx.server, ctx.tokens["carl"]) as http:
            assert http.get("/api/submissions").json() == []
    finally:
        ctx.server.stop()
    assert sorted(r[2] for r in rows(ctx.data).values()) == [1, 1]  # each graded once; the unread try not counted
    assert_quiet_log(ctx.server)


@pytest.fixture
def small_disk():
    """``mount(folder, megabytes)``: a RAM disk of that size on ``folder``, as the data folder's own
    disk would be, unmounted at the end (root only: skipped with the reason elsewhere)."""
    mounted = []

    def mount(folder, megabytes: int = 4):
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}m,mode=0700", "tmpfs", str(folder)],
                              capture_output=True, text=True)
        if done.returncode:
            pytest.skip(f"no small disk to fill: mount failed: {done.stderr.strip()}")
        mounted.append(folder)
        return folder
    yield mount
    for folder in reversed(mounted):
        subprocess.run(["umount", str(folder)], check=True)


def fill(folder: Path) -> Path:
    """Fill ``folder``'s disk to the last byte; returns the file that did it (remove it to free the disk)."""
    filler = folder / "filler"
    with open(filler, "wb") as file:
        try:
            while True:
                file.write(b"\0" * 65536)
                file.flush()
        except OSError:
            pass
    return filler


def test_the_data_folder_is_unwritable_on_a_full_disk_and_short_of_room_below_one_upload(tmp_path, small_disk):
    storage = Storage(tmp_path / "data")
    notebooks = small_disk(storage.root / "notebooks", megabytes=4)
    assert storage.unwritable(1024**2) == []
    (notebooks / "most").write_bytes(b"\0" * (3 * 1024**2 + 512 * 1024))
    assert storage.unwritable(1024**2) == [
        "the data folder is full: DATA/notebooks has 0.5 MB free, less than an upload may need (1.0 MB)"]
    fill(notebooks)
    assert storage.unwritable(1024**2) == ["the data folder cannot be written: DATA/notebooks: No space left on device"]


def test_a_full_disk_is_waited_out_uploads_get_503_and_health_says_so(tmp_path, small_disk):
    ctx = started(tmp_path, ("ann", "bob"), "--max-upload-mb", "1")
    try:
        feedback, notebooks = small_disk(ctx.data / "feedback"), small_disk(ctx.data / "notebooks")
        filled = {folder: fill(folder) for folder in (feedback, notebooks)}
        said = wait_unhealthy(ctx.server, "the data folder cannot be written: DATA/notebooks: No space left on device")
        assert any("DATA/feedback: No space left" in problem for problem in said["problems"]), said
        refused = submit_notebook(ctx.server, ctx.tokens["bob"], notebook_text(tmp_path, "bob"))
        assert refused.status_code == 503 and "data folder" in refused.json()["detail"], refused.text
        assert refused.headers["retry-after"]
        filled[notebooks].unlink()  # room for uploads again; still none for the feedback pages
        first = submit_notebook(ctx.server, ctx.tokens["ann"], notebook_text(tmp_path, "ann"))
        assert first.status_code == 202, first.text
        said = wait_unhealthy(ctx.server, f"storing the result of submission {first.json()['id']}")
        assert any("No space left on device" in problem for problem in said["problems"]), said
        assert rows(ctx.data)[first.json()["id"]][1:3] == ("grading", 1)  # held, not failed, not tried again
        filled[feedback].unlink()
        assert ctx.server.wait_healthy()["ok"]
        with client(ctx.server, ctx.tokens["ann"]) as http:
            view = wait_done(http, first.json()["id"])
            assert view["score"] == 8 and http.get(view["feedback_url"]).status_code == 200
        with client(ctx.server, ctx.tokens["bob"]) as http:
            assert http.get("/api/submissions").json() == []  # the refused upload: nothing of it stored
    finally:
        ctx.server.stop()
    assert [r[2] for r in rows(ctx.data).values()] == [1]
    assert_quiet_log(ctx.server)


# --------------------------------------------------------------------------
# the engine's failures are the grader's, not the student's


def live_workers(data, killed: set[int]) -> list[int]:
    """The grading workers' process ids (each copies the course to DATA/work/course-PID)."""
    pids = [int(p.name.removeprefix("course-")) for p in (data / "work").glob("course-*")]
    return [pid for pid in pids if pid not in killed and os.path.exists(f"/proc/{pid}")]


def test_a_killed_grading_worker_requeues_and_costs_no_attempt(tmp_path):
    ctx = started(tmp_path, policies={"attempts_per_day": 1})
    killed: set[int] = set()
    try:
        sub = submit_notebook(ctx.server, ctx.tokens["ann"], notebook_text(tmp_path, "ann")).json()["id"]
        for attempt in range(1, MAX_TRIES + 1):  # kill the worker each time the submission is being graded
            deadline = time.monotonic() + 300
            while not (rows(ctx.data)[sub][1:3] == ("grading", attempt) and live_workers(ctx.data, killed)):
                assert time.monotonic() < deadline, rows(ctx.data)
                time.sleep(0.2)
            for pid in live_workers(ctx.data, killed):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
        with client(ctx.server, ctx.tokens["ann"]) as http:
            deadline = time.monotonic() + 300
            while (view := http.get(f"/api/submissions/{sub}").json())["state"] != "failed":
                assert time.monotonic() < deadline, view
                time.sleep(0.5)
            assert view["score"] is None and "not counted as an attempt" in view["reason"]
            # today's one attempt is still ann's: the next upload is accepted and graded
            again = submit_notebook(ctx.server, ctx.tokens["ann"], notebook_text(tmp_path, "ann"))
            assert again.status_code == 202, again.text
            assert wait_done(http, again.json()["id"])["score"] == 8
            assert submit_notebook(ctx.server, ctx.tokens["ann"], notebook_text(tmp_path, "ann")).status_code == 429
        assert health(ctx.server)[0] == 200
    finally:
        ctx.server.stop()
    log = ctx.server.log.read_text()
    assert log.count(f"grading submission {sub} failed in the grader") == MAX_TRIES
    # the next start queues the set-aside submission again, and grades it
    ctx.server.start()
    try:
        with client(ctx.server, ctx.tokens["ann"]) as http:
            assert wait_done(http, sub)["score"] == 8
    finally:
        ctx.server.stop()


def test_nbgrader_failing_in_the_grader_requeues_and_costs_no_attempt(tmp_path):
    """A failure of the grader's own (here nbgrader cannot write the graded notebook: its folder in
    the worker's course is a file, as a full disk would fail it) is not the student's error: tried
    MAX_TRIES times after growing pauses, then set aside, no score and no attempt; once the grader
    is mended, the next upload is graded, and the one set aside is graded by itself once its
    pause is over (no restart)."""
    ctx = started(tmp_path, policies={"attempts_per_day": 1})
    try:
        deadline = time.monotonic() + 300
        while not live_workers(ctx.data, set()):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        (worker,) = live_workers(ctx.data, set())
        autograded = ctx.data / "work" / f"course-{worker}" / "autograded"
        shutil.rmtree(autograded, ignore_errors=True)
        autograded.write_text("")
        with client(ctx.server, ctx.tokens["ann"]) as http:
            sub = submit_notebook(ctx.server, ctx.tokens["ann"], notebook_text(tmp_path, "ann")).json()["id"]
            deadline, tried = time.monotonic() + 300, {}  # gradings started -> when first seen
            while True:  # (the last try may fail between two looks: its count is seen with "failed")
                state = rows(ctx.data)[sub]
                tried.setdefault(state[2], time.monotonic())
                if state[1] == "failed":
                    break
                assert time.monotonic() < deadline, state
                time.sleep(0.2)
            view = http.get(f"/api/submissions/{sub}").json()
            assert view["score"] is None and "not counted as an attempt" in view["reason"], view
            assert "autograde failed: NotADirectoryError" in view["reason"], view
            # each try after a pause (10 s, then 20 s), not three within seconds
            pauses = (tried[2] - tried[1], tried[3] - tried[2])
            assert pauses[0] > RETRY_PAUSE_SECONDS - 1 and pauses[1] > 2 * RETRY_PAUSE_SECONDS - 1, tried
            assert wait_for(lambda: health(ctx.server)[1]["set_aside"] == 1)
            autograded.unlink()
            autograded.mkdir()
            again = submit_notebook(ctx.server, ctx.tokens["ann"], notebook_text(tmp_path, "ann"))
            assert again.status_code == 202, again.text  # today's one attempt is still ann's
            assert wait_done(http, again.json()["id"])["score"] == 8
            with sqlite3.connect(ctx.data / "service.db") as database:  # as if its pause were over
                database.execute("update submissions set not_before = '2000-01-01 00:00:00' where id = ?", (sub,))
            assert wait_done(http, sub)["score"] == 8
    finally:
        ctx.server.stop()
    assert ctx.server.log.read_text().count(f"grading submission {sub} failed in the grader") == MAX_TRIES


# --------------------------------------------------------------------------
# fairness: a hanging notebook delays only its sender


def test_a_hanging_notebook_delays_only_its_sender(tmp_path):
    ctx = started(tmp_path, ("ann", "bob"), "--notebook-timeout", "300", "--stall-minutes", "0.5", jobs=2)
    try:
        hung = [submit_notebook(ctx.server, ctx.tokens["ann"], notebook_text(tmp_path, "ann", HANG)).json()["id"]
                for _ in range(2)]
        bob = submit_notebook(ctx.server, ctx.tokens["bob"], notebook_text(tmp_path, "bob")).json()["id"]
        started_at = time.monotonic()
        with client(ctx.server, ctx.tokens["bob"]) as http:
            assert wait_done(http, bob, timeout=240)["score"] == 8
        waited = time.monotonic() - started_at
        states = rows(ctx.data)
        # ann's first hangs in one worker; her second waits for it (one notebook per student at a
        # time), so bob's took the other worker
        assert (states[hung[0]][1], states[hung[1]][1]) == ("grading", "queued"), states
        assert waited < 240
        # then nothing moves while ann's first hangs: after --stall-minutes, /health says so
        said = wait_unhealthy(ctx.server, "the queue has not moved")
        assert any("2 submissions wait" in problem for problem in said["problems"]), said
    finally:
        ctx.server.stop()


# --------------------------------------------------------------------------
# refusals: a 4xx with a reason, never a 500 or a traceback


def test_bad_requests_are_refused_with_a_reason_and_no_traceback(tmp_path):
    ctx = started(tmp_path)
    try:
        url, token = ctx.server.url, ctx.tokens["ann"]
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        cases = {
            "nested": ("[" * 100_000 + "]" * 100_000, 400),
            "not JSON": ("{notebook:", 400),
            "a list": ("[1, 2]", 400),
            "no notebook": ('{"filename": "a.ipynb"}', 400),
            "a number as notebook": ('{"notebook": 3, "filename": "a.ipynb"}', 400),
            "too large": ('{"notebook": "' + "x" * (11 * 1024**2) + '"}', 413),
        }
        for name, (body, status) in cases.items():
            reply = httpx.post(f"{url}/api/submissions", content=body, headers=headers, timeout=60)
            assert reply.status_code == status, (name, reply.text)
            assert reply.json()["detail"] and "\n" not in reply.json()["detail"], name
        bad_key = httpx.post(f"{url}/api/submissions", content="{}", timeout=60,
                             headers={**headers, "Idempotency-Key": "x" * 65})
        assert bad_key.status_code == 400 and "Idempotency-Key" in bad_key.json()["detail"]
        # clients that hang up halfway through an upload
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", ctx.server.port)) as raw:
                raw.sendall(f"POST /api/submissions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                            "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"notebook\": ".encode())
        time.sleep(2)
        assert health(ctx.server)[0] == 200
    finally:
        ctx.server.stop()
    assert_quiet_log(ctx.server)


def test_an_upload_sent_again_with_its_key_is_one_submission(tmp_path):
    ctx = started(tmp_path, policies={"attempts_per_day": 2})
    try:
        text = notebook_text(tmp_path, "ann")
        with ThreadPoolExecutor(4) as pool:  # the same upload, sent again while the first is stored
            replies = list(pool.map(lambda _: submit_notebook(ctx.server, ctx.tokens["ann"], text, key="k-1"),
                                    range(4)))
        assert {r.json()["id"] for r in replies} == {replies[0].json()["id"]}
        assert sorted(r.status_code for r in replies) == [200, 200, 200, 202]
        other = submit_notebook(ctx.server, ctx.tokens["ann"], text, key="k-2")
        assert other.status_code == 202  # a new key is a new attempt: the second of two
        assert submit_notebook(ctx.server, ctx.tokens["ann"], text, key="k-1").status_code == 200
        # bob's key is his own: the same key from another student is another submission
        assert submit_notebook(ctx.server, ctx.tokens["bob"], text, key="k-1").status_code == 202
    finally:
        ctx.server.stop()


# --------------------------------------------------------------------------
# the data folder: private, one service, a clear refusal to start


def test_the_data_folder_is_private_and_held_by_one_service(tmp_path):
    ctx = started(tmp_path)
    try:
        sub = submit_notebook(ctx.server, ctx.tokens["ann"], notebook_text(tmp_path, "ann")).json()["id"]
        with client(ctx.server, ctx.tokens["ann"]) as http:
            wait_done(http, sub)
        assert ctx.data.stat().st_mode & 0o777 == 0o700
        for path in (ctx.data / "service.db", ctx.data / "notebooks" / f"{sub}.ipynb",
                     ctx.data / "feedback" / f"{sub}.html", ctx.data / "autograded" / f"{sub}.ipynb"):
            assert path.stat().st_mode & 0o777 == 0o600, path
        second = subprocess.run([sys.executable, "-m", "autograder", "serve", "--data", str(ctx.data), "--source",
                                 str(ctx.source), "--port", "9"], cwd=REPO, capture_output=True, text=True,
                                timeout=600)
        assert second.returncode == 2 and "another service" in second.stderr, second.stderr
        assert len(second.stderr.strip().splitlines()) == 1, second.stderr
        assert health(ctx.server)[0] == 200  # the first one serves on, its work folder untouched
    finally:
        ctx.server.stop()


def test_a_second_service_on_the_same_database_is_refused(tmp_path, database):
    """Another data folder, the same database (SQLite's file, or the PostgreSQL server): the
    database's lease refuses the second service, which names the first; the first one gives the
    lease back when it stops."""
    ctx = started(tmp_path, db=database)
    url = database or f"sqlite:///{ctx.data / 'service.db'}"
    try:
        second = subprocess.run([sys.executable, "-m", "autograder", "serve", "--data", str(tmp_path / "data-2"),
                                 "--db", url, "--source", str(ctx.source), "--port", "9"], cwd=REPO,
                                capture_output=True, text=True, timeout=600)
        assert second.returncode == 2 and "another service" in second.stderr, second.stderr
        assert str(ctx.data) in second.stderr and len(second.stderr.strip().splitlines()) == 1, second.stderr
        assert health(ctx.server)[0] == 200
    finally:
        ctx.server.stop()
    with Database(url).engine.connect() as connection:
        assert connection.execute(text("select count(*) from service_lease")).scalar() == 0


@pytest.mark.parametrize("where", ["data folder", "database"])
def test_an_unusable_data_folder_or_database_is_one_line_and_exit_2(tmp_path, where):
    (tmp_path / "file").write_text("not a folder")
    args = ["--data", str(tmp_path / "file" / "data")] if where == "data folder" else \
        ["--data", str(tmp_path / "data"), "--db", "postgresql://nobody@127.0.0.1:1/course"]
    done = subprocess.run([sys.executable, "-m", "autograder", "serve", *args, "--source",
                           str(course_source(tmp_path)), "--port", "9"], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 2 and f"cannot use the {where}" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_log_out_works_from_an_error_page(tmp_path):
    ctx = started(tmp_path)
    try:
        with client(ctx.server) as browser:
            assert log_in(browser, ctx.tokens["ann"]).status_code == 303
            page = browser.get("/submissions/999", headers={"Accept": "text/html"})
            assert page.status_code == 404
            csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
            assert browser.post("/logout", data={"csrf": csrf}).status_code == 303
            assert browser.get("/me").status_code == 303  # logged out: back to the login page
    finally:
        ctx.server.stop()


def test_proxy_headers_are_believed_only_from_the_named_proxy(tmp_path):
    """The login limiter counts by address: a local client's X-Forwarded-For must not give it
    a fresh address per request unless it is the proxy the instructor named."""
    ctx = started(tmp_path, ("ann",), "--rate-limit", "5")
    try:
        codes = [log_in(client(ctx.server), "wrong", {"X-Forwarded-For": f"10.0.0.{n}"}).status_code
                 for n in range(7)]
        assert codes[:5] == [200] * 5 and codes[5:] == [429] * 2, codes
    finally:
        ctx.server.stop()
    ctx.server.extra = (*ctx.server.extra, "--trusted-proxy", "127.0.0.1")
    ctx.server.start()
    try:
        codes = [log_in(client(ctx.server), "wrong", {"X-Forwarded-For": f"10.0.0.{n}"}).status_code
                 for n in range(7)]
        assert codes == [200] * 7, codes  # each a student behind the proxy, counted apart
    finally:
        ctx.server.stop()


# --------------------------------------------------------------------------
# the student's client: a dropped connection


class DroppingProxy:
    """A TCP relay to the service that, for the first ``drops`` requests, passes the request on
    and hangs up before the answer comes back: the upload arrived, the student saw nothing."""

    def __init__(self, target_port: int, drops: int):
        self.target, self.drops = target_port, drops
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                downstream, _ = self.listener.accept()
            except OSError:  # closed
                return
            with downstream, socket.create_connection(("127.0.0.1", self.target)) as upstream:
                request = _read_message(downstream)
                upstream.sendall(request)
                answer = _read_message(upstream)
                if self.drops:
                    self.drops -= 1  # the service has it; the client gets no answer
                    continue
                downstream.sendall(answer)

    def close(self) -> None:
        """No more connections: shut down first, which wakes the thread's accept (close alone does not)."""
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:  # already shut
            pass
        self.listener.close()
        self.thread.join(timeout=10)


def _read_message(sock: socket.socket) -> bytes:
    """One HTTP/1.1 message: its head, then Content-Length bytes of body."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1)) if b"ontent-" in head else 0
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def test_submit_sends_again_after_a_dropped_connection_and_is_counted_once(tmp_path, monkeypatch, capsys):
    from attention_checks import submit as client_module

    monkeypatch.setattr(client_module, "RESEND_PAUSES", (0.5, 0.5))
    ctx = started(tmp_path, ("ann",), policies={"attempts_per_day": 2})
    notebook = tmp_path / "self_attention.ipynb"
    notebook.write_text(notebook_text(tmp_path, "ann"))
    proxy = DroppingProxy(ctx.server.port, drops=1)
    try:
        sub = client_module.submit(f"http://127.0.0.1:{proxy.port}", ctx.tokens["ann"], path=notebook, wait=0)
        printed = capsys.readouterr().out
        assert "no answer from the submission service" in printed and "The service has it, once" in printed
        with client(ctx.server, ctx.tokens["ann"]) as http:
            assert [s["id"] for s in http.get("/api/submissions").json()] == [sub["id"]]  # one attempt of two
        proxy.close()
        # a service that cannot be reached at all: the student is told it may have arrived, and where to look
        with pytest.raises(client_module.SubmitError, match="may have arrived: look at"):
            client_module.submit(f"http://127.0.0.1:{proxy.port}", ctx.tokens["ann"], path=notebook, wait=0)
    finally:
        proxy.close()
        ctx.server.stop()
