"""The submission service grading on a Dask cluster (`serve --scheduler-file`), with real
`dask scheduler` and `dask worker` processes started as an instructor starts them."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from classroom.cluster import stop_dask
from classroom.service import Server, client, course_source, issue_tokens, notebook_text, wait_done

pytestmark = pytest.mark.slow  # runs kernels, the CLI, a server or a browser

DASK = Path(sys.executable).with_name("dask")


def start(command: list, log: Path) -> subprocess.Popen:
    return subprocess.Popen([str(c) for c in command], stdout=open(log, "w"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def test_a_submission_is_graded_on_a_dask_worker(tmp_path):
    scheduler_file = tmp_path / "scheduler.json"
    processes = [start([DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                        "--scheduler-file", scheduler_file], tmp_path / "scheduler.log")]
    processes.append(start([DASK, "worker", "--scheduler-file", scheduler_file, "--nworkers", "1", "--nthreads", "1",
                            "--no-dashboard"], tmp_path / "worker.log"))
    deadline = time.monotonic() + 120
    while not scheduler_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    data = tmp_path / "data"
    tokens = issue_tokens(data, ["ann"])
    server = Server(data, course_source(tmp_path), "--scheduler-file", str(scheduler_file)).start()
    try:
        with client(server, tokens["ann"]) as http:
            reply = http.post("/api/submissions", json={"notebook": notebook_text(tmp_path, "ann"),
                                                        "filename": "self_attention.ipynb"})
            view = wait_done(http, reply.json()["id"])
            assert (view["status"], view["score"], view["max_score"]) == ("ok", 8, 8)
            assert http.get(view["feedback_url"]).status_code == 200
        assert "1 grading workers" in server.log.read_text()  # the cluster's one worker thread
    finally:
        server.stop()
        stop_dask(processes[1:], processes[:1])
