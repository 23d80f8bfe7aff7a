"""The submission service grading on a Dask cluster (`serve --scheduler-file`), with real
`dask scheduler` and `dask worker` processes started as an instructor starts them."""
from __future__ import annotations

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
            assert (view["status"], view["score"], view["max_score"]) == ("ok", 8, 8)
            assert http.get(view["feedback_url"]).status_code == 200
        assert "1 grading workers" in server.log.read_text()  # the cluster's one worker thread
    finally:
        server.stop()
        dask.stop()
