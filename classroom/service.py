"""Start the submission service as an instructor does (``python -m autograder tokens`` and
``python -m autograder serve`` on a free port), for the tests of tests/test_service*.py and
benchmarks/service.py; and a PostgreSQL server of their own for its database (``LocalPostgres``).

The course holds assignment 01 only (and copies of it under other names where a test needs
another policy), so that preparing it and grading stay cheap.
"""
from __future__ import annotations

import csv
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
import yaml

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


def issue_tokens(data: Path, students: list[str], instructors: list[str] = ("prof",),
                 db: str | None = None) -> dict[str, str]:
    roster = data.parent / "roster.csv"
    # lms_id: each student's Moodle participant id (the feedback zip's folders are named by it)
    roster.write_text("student_id,lms_id,name,email\n" + "".join(
        f"{s},{1000 + n},{s.title()} Student,{s}@example.edu\n" for n, s in enumerate(students)))
    out = data.parent / "tokens.csv"
    args = [sys.executable, "-m", "autograder", "tokens", str(roster), "--data", str(data), "--out", str(out),
            *(("--db", db) if db else ())]
    for instructor in instructors:
        args += ["--instructor", instructor]
    subprocess.run(args, check=True, cwd=REPO, capture_output=True, text=True)
    with open(out, encoding="utf-8-sig", newline="") as file:
        return {row["student_id"]: row["token"] for row in csv.DictReader(file)}


class Server:
    """``python -m autograder serve`` in its own process group (killed whole by ``kill``)."""

    def __init__(self, data: Path, source: Path, *extra: str, jobs: int = 1):
        self.data, self.source, self.extra, self.jobs = data, source, extra, jobs
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = data.parent / f"serve-{self.port}.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> "Server":
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "autograder", "serve", "--data", str(self.data), "--source", str(self.source),
             "--port", str(self.port), "--jobs", str(self.jobs), *self.extra],
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

    def wait_healthy(self, timeout: float = 300) -> dict:
        """Until ``/health`` answers 200 (the grader has mended itself); returns its answer."""
        deadline = time.monotonic() + timeout
        while True:
            reply = httpx.get(f"{self.url}/health", timeout=60)
            if reply.status_code == 200 or time.monotonic() > deadline:
                return reply.json()
            time.sleep(1)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """The whole process group: the service, its grading workers and their kernels."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            self.process.wait(timeout=60)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.kill(signal.SIGTERM)


def start_service(tmp_path: Path, students=("ann", "bob"), *extra: str, policies: dict | None = None,
                  jobs: int = 1, db: str | None = None) -> SimpleNamespace:
    """In ``tmp_path``: a course source, the students' tokens and a running service (``policies``:
    assignment 01's; ``db``: its database URL, else SQLite in DATA), as a namespace."""
    source = course_source(tmp_path)
    data = tmp_path / "data"
    tokens = issue_tokens(data, list(students), db=db)
    extra = (*extra, *(("--db", db) if db else ()))
    if policies:
        (tmp_path / "policies.yml").write_text(yaml.safe_dump({"assignments": {ASSIGNMENT: policies}}))
        extra = (*extra, "--policies", str(tmp_path / "policies.yml"))
    return SimpleNamespace(server=Server(data, source, *extra, jobs=jobs).start(), tokens=tokens, data=data,
                           source=source, root=tmp_path)


def client(server: Server, token: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=server.url, headers=headers, timeout=60, follow_redirects=False)


def log_in(http: httpx.Client, token: str, headers: dict | None = None) -> httpx.Response:
    """Log ``http`` in as a browser does: the login page (its form's CSRF token, and the cookie
    that holds it), then the form posted with the token (both with ``headers``)."""
    csrf = re.search(r'name="csrf" value="([^"]+)"', http.get("/", headers=headers).text).group(1)
    return http.post("/login", data={"token": token, "csrf": csrf}, headers=headers)


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


def submit_notebook(server: Server, token: str, notebook: str, key: str | None = None) -> httpx.Response:
    """POST a notebook to the API as ``attention_checks.submit`` does (with its Idempotency-Key)."""
    with client(server, token) as http:
        return http.post("/api/submissions", json={"notebook": notebook, "filename": "self_attention.ipynb"},
                         headers={"Idempotency-Key": key} if key else {})


# --------------------------------------------------------------------------
# PostgreSQL

def postgres_programs() -> Path | None:
    """The folder of PostgreSQL's initdb and pg_ctl (Debian keeps them off PATH), or None."""
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    return versions[-1].parent if versions else None


class LocalPostgres:
    """A PostgreSQL server of its own, as a course's database server would be: a new cluster
    (``initdb``, password-less for the local user ``grader``) on a free port of 127.0.0.1,
    started with ``pg_ctl``; ``stop`` stops it and removes its files. PostgreSQL refuses to run
    as root: as root it runs as the ``postgres`` user (which Debian's package makes)."""

    def __init__(self):
        programs = postgres_programs()
        if programs is None:
            raise FileNotFoundError("PostgreSQL is not installed (Debian: apt-get install postgresql; "
                                    "`make setup` does it as root)")
        self.programs, self.port = programs, free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="autograder-postgres-"))
        self.as_owner = []
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres")
            self.as_owner = ["runuser", "-u", "postgres", "--"]
        self.url = f"postgresql://grader@127.0.0.1:{self.port}/postgres"
        self._run("initdb", "-D", self.folder / "cluster", "-U", "grader", "-A", "trust", "--no-sync")
        self._run("pg_ctl", "-D", self.folder / "cluster", "-l", self.folder / "server.log", "-w", "-o",
                  f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off", "start")

    def _run(self, program: str, *arguments) -> None:
        done = subprocess.run([*self.as_owner, str(self.programs / program), *map(str, arguments)],
                              capture_output=True, text=True, cwd=self.folder, timeout=300)
        if done.returncode:
            raise RuntimeError(f"{program} failed ({done.returncode}): {done.stderr or done.stdout}")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", self.folder / "cluster", "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
