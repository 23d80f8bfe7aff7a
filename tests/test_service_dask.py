"""The submission service grading on a Dask cluster (`serve --scheduler-file`, `--scheduler`),
with real `dask scheduler` and `dask worker` processes started as an instructor starts them,
and a scheduler lost and started again while the service runs."""
from __future__ import annotations

import json
import os
import signal
import time

import pytest

from classroom.cluster import LocalDask
from classroom.service import Server, client, course_source, issue_tokens, notebook_text, wait_done

pytestmark = pytest.mark.slow  # runs kernels, the CLI, a server or a browser


def test_a_submission_is_graded_on_a_dask_worker(tmp_path):
    dask = LocalDask(tmp_path)  # a scheduler and one worker, no preloads; their logs in tmp_path
    data = tmp_path / "data"
    tokens = issue_tokens(data, ["ann"])
    server = Server(data, course_source(tmp_path), "--scheduler-file", str(dask.file)).start()
    try:
        with client(server, tokens["ann"]) as http:
            reply = http.post("/api/submissions", json={"notebook": notebook_text(tmp_path, "ann"),
                                                        "filename": "self_attention.ipynb"})
            view = wait_done(http, reply.json()["id"])
            assert (view["status"], view["score"], view["max_score"]) == ("ok", 8, 10)
            assert http.get(view["feedback_url"]).status_code == 200
        assert "1 grading workers" in server.log.read_text()  # the cluster's one worker thread
    finally:
        server.stop()
        dask.stop()


def test_a_lost_scheduler_is_said_on_health_and_reconnected_to(tmp_path):
    """The scheduler killed while the service runs: /health says so, nothing is graded (and no
    one charged) until a new scheduler (and a worker) answers on the same address, then
    everything is, without restarting the service."""
    dask = LocalDask(tmp_path / "dask", wait_for_workers=120)
    address = json.loads(dask.file.read_text())["address"]
    port = address.rsplit(":", 1)[1]
    data = tmp_path / "data"
    tokens = issue_tokens(data, ["ann"])
    server = Server(data, course_source(tmp_path), "--scheduler", address).start()
    try:
        os.killpg(dask.scheduler.pid, signal.SIGKILL)
        dask.scheduler.wait()
        with client(server, tokens["ann"]) as http:
            reply = http.post("/api/submissions", json={"notebook": notebook_text(tmp_path, "ann"),
                                                        "filename": "self_attention.ipynb"})
            assert reply.status_code == 202, reply.text
            deadline = time.monotonic() + 180
            while (answer := http.get("/health")).status_code != 503:
                assert time.monotonic() < deadline, answer.json()
                time.sleep(1)
            assert any("scheduler" in problem for problem in answer.json()["problems"]), answer.json()
            assert http.get(f"/api/submissions/{reply.json()['id']}").json()["state"] in ("queued", "grading")
            # a new scheduler on the same address, and a worker for it: Dask's workers end with their
            # scheduler, and the instructor's service manager (systemd, a batch script) starts both again
            dask.scheduler = dask._start("scheduler-again", ["scheduler", "--host", "127.0.0.1", "--port", port,
                                                             "--no-dashboard"])
            dask.workers.append(dask._start("worker-again", ["worker", address, "--nthreads", "1", "--no-dashboard"]))
            view = wait_done(http, reply.json()["id"], timeout=300)
            assert (view["status"], view["score"]) == ("ok", 8)
        assert server.wait_healthy()["ok"]
    finally:
        server.stop()
        dask.stop()
