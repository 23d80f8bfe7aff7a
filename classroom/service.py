"""Start the submission service as an instructor does (``python -m autograder tokens`` and
``python -m autograder serve`` on a free port), for the tests of tests/test_service*.py.

The course holds assignment 01 only (and copies of it under other names where a test needs
another policy), so that preparing it and grading stay cheap.
"""
from __future__ import annotations

import csv
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from classroom import REPO, make_submission

ASSIGNMENT = "01-self-attention"
STARTUP_SECONDS = 600  # preparing the course under a loaded CI machine


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def course_source(root: Path, copies: tuple[str, ...] = ()) -> Path:
    """A source folder with assignment 01, and the same notebook under each name of ``copies``."""
    source = root / "source"
    for name in (ASSIGNMENT, *copies):
        shutil.copytree(REPO / "solutions" / ASSIGNMENT, source / name,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    return source


def issue_tokens(data: Path, students: list[str], instructors: list[str] = ("prof",)) -> dict[str, str]:
    roster = data.parent / "roster.csv"
    roster.write_text("student_id,name,email\n" + "".join(f"{s},{s.title()} Student,{s}@example.edu\n"
                                                          for s in students))
    out = data.parent / "tokens.csv"
    args = [sys.executable, "-m", "autograder", "tokens", str(roster), "--data", str(data), "--out", str(out)]
    for instructor in instructors:
        args += ["--instructor", instructor]
    subprocess.run(args, check=True, cwd=REPO, capture_output=True, text=True)
    with open(out, encoding="utf-8-sig", newline="") as file:
        return {row["student_id"]: row["token"] for row in csv.DictReader(file)}


class Server:
    """``python -m autograder serve`` in its own process group (killed whole by ``kill``)."""

    def __init__(self, data: Path, source: Path, *extra: str):
        self.data, self.source, self.extra = data, source, extra
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = data.parent / f"serve-{self.port}.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> "Server":
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "autograder", "serve", "--data", str(self.data), "--source", str(self.source),
             "--port", str(self.port), "--jobs", "1", *self.extra],
            cwd=REPO, env=env, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the service exited ({self.process.returncode}):\n{self.log.read_text()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=5).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.kill()
        raise RuntimeError(f"the service did not start in {STARTUP_SECONDS} s:\n{self.log.read_text()}")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """The whole process group: the service, its grading workers and their kernels."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            self.process.wait(timeout=60)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.kill(signal.SIGTERM)


def client(server: Server, token: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=server.url, headers=headers, timeout=60, follow_redirects=False)


def notebook_text(root: Path, student: str, code: dict[str, str] | None = None, assignment: str = ASSIGNMENT) -> str:
    return make_submission(root, student, assignment, code).read_text(encoding="utf-8")


def wait_done(http: httpx.Client, submission_id: int, timeout: float = 600) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        view = http.get(f"/api/submissions/{submission_id}").json()
        if view["state"] == "done":
            return view
        time.sleep(0.5)
    raise TimeoutError(f"submission {submission_id} not graded in {timeout} s")
