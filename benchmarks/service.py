"""The submission service under load: feedback latency, and a burst from a class.

Starts ``python -m autograder serve`` as an instructor does (its own data folder, tokens for
a class of STUDENTS from ``python -m autograder tokens``), then

1. latency: RUNS notebooks of assignment 01-06 (the reference solutions), one at a time on
   the idle service: seconds from the upload to the score and feedback page, as the student's
   client sees it (median and 95th percentile);
2. burst: BURST submissions from STUDENTS students sent at once (a deadline evening), then
   waits until every accepted one is graded: none lost, throughput, and the time each waited
   (the service's own received and graded times).

    .venv/bin/python -m benchmarks.service [--runs 12] [--burst 200] [--students 50] [--jobs N]

With ``--faults``, instead: the burst graded on a local Dask cluster (a scheduler and JOBS
workers, ``serve --scheduler``), and while it is graded a worker killed, the scheduler killed and
started again on its address, and the database locked for 30 s by another writer; ``/health``
asked every second throughout. It prints whether every accepted submission was graded exactly
once (one result each, whatever the retries), whether any student was charged (a status other
than ok, or a submission set aside, for a class of correct notebooks), and what ``/health``
said during each fault. A quick run on 2 cores: ``--faults --students 10 --burst 40``.

It prints the machine's load average first: the figures are only comparable on the same load.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]

from classroom.cluster import LocalDask
from classroom.service import Server, client, issue_tokens, notebook_text

ASSIGNMENTS = ["01-self-attention", "02-softmax-scaling", "03-qkv", "04-multi-head", "05-masks", "06-encoder"]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def wait_all(server: Server, tokens: dict[str, str], ids: dict[int, str], timeout: float) -> dict[int, dict]:
    """Each student's own list, every 2 s (well within the per-token rate limit), until all are done."""
    done: dict[int, dict] = {}
    started = time.monotonic()
    deadline, said = started + timeout, started
    students = sorted(set(ids.values()))
    while len(done) < len(ids) and time.monotonic() < deadline:
        for student in students:
            with client(server, tokens[student]) as http:
                for view in http.get("/api/submissions").json():
                    if view["id"] in ids and view["state"] == "done":
                        done[view["id"]] = view
        if time.monotonic() - said > 60:  # a long burst on a loaded machine: show it moves
            said = time.monotonic()
            print(f"  {len(done)} of {len(ids)} graded after {said - started:.0f} s "
                  f"(load average {os.getloadavg()[0]:.1f})", flush=True)
        time.sleep(2)
    return done


class HealthLog:
    """``/health`` every second in a thread: (seconds since the start, status code, problems)."""

    def __init__(self, server: Server):
        self.server, self.samples, self.stopping = server, [], threading.Event()
        self.started = time.monotonic()
        self.thread = threading.Thread(target=self._ask, daemon=True)
        self.thread.start()

    def _ask(self) -> None:
        while not self.stopping.wait(1):
            try:
                reply = httpx.get(f"{self.server.url}/health", timeout=30)
                self.samples.append((time.monotonic() - self.started, reply.status_code, reply.json()["problems"]))
            except httpx.HTTPError as err:
                self.samples.append((time.monotonic() - self.started, 0, [f"no answer: {err}"]))

    def said(self, since: float, until: float) -> str:
        """What /health said between two moments: its codes and its reasons, in short."""
        window = [s for s in self.samples if since <= s[0] <= until]
        codes = {code: sum(s[1] == code for s in window) for code in sorted({s[1] for s in window})}
        reasons = sorted({problem.split(":")[0] + ": " + problem.split(":")[1][:70] if ":" in problem else problem
                          for s in window for problem in s[2]})
        return f"{codes} {reasons[:4]}"

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()


def graded_count(data: Path) -> int:
    with sqlite3.connect(data / "service.db", timeout=60) as db:
        return db.execute("select count(*) from submissions where state = 'done'").fetchone()[0]


def wait_graded(data: Path, count: int, timeout: float = 1800) -> None:
    deadline = time.monotonic() + timeout
    while graded_count(data) < count and time.monotonic() < deadline:
        time.sleep(1)


def kill_a_worker(dask: LocalDask) -> None:
    """A `dask worker` process's worker (its nanny starts another), as the OOM killer would."""
    import psutil

    for child in psutil.Process(dask.workers[0].pid).children():
        child.kill()


@dataclass
class Uploads:
    """The class's uploads of the reference notebooks: upload n is a student's and an assignment's,
    each taken in turn."""

    server: Server
    tokens: dict[str, str]  # student -> token
    students: list[str]
    notebooks: dict[str, str]  # assignment -> notebook
    idempotent: bool = False  # each upload with an Idempotency-Key, as a client that retries sends it

    def send(self, n: int) -> tuple[int, str] | None:
        """Upload n: (its submission id, its student) if accepted (202), else None."""
        student = self.students[n % len(self.students)]
        headers = {"Idempotency-Key": f"b{n}"} if self.idempotent else {}
        with client(self.server, self.tokens[student]) as http:
            reply = http.post("/api/submissions", json={"notebook": self.notebooks[ASSIGNMENTS[n % len(ASSIGNMENTS)]],
                                                        "filename": "n.ipynb"}, headers=headers)
        return (reply.json()["id"], student) if reply.status_code == 202 else None

    def burst(self, count: int) -> tuple[dict[int, str], float]:
        """Uploads 0 to ``count`` - 1 sent at once (16 at a time): the accepted ones (submission id
        -> student), and when the burst began."""
        sent = time.monotonic()
        with ThreadPoolExecutor(16) as pool:
            accepted = dict(r for r in pool.map(self.send, range(count)) if r)
        print(f"burst: {len(accepted)} of {count} accepted in {time.monotonic() - sent:.1f} s", flush=True)
        return accepted, sent


class Faults:
    """Faults injected one after the other while a burst is graded, each once enough submissions
    are graded; ``windows``: each fault's name, and when it began and ended on HealthLog's clock
    (to read what /health said meanwhile)."""

    def __init__(self, data: Path, health: HealthLog):
        self.data, self.health, self.windows = data, health, []

    def inject(self, name: str, after: int, act, recover=None, hold: float = 0) -> None:
        """Once ``after`` submissions are graded: ``act``, ``hold`` seconds, then ``recover``."""
        wait_graded(self.data, after)
        began = time.monotonic() - self.health.started
        act()
        time.sleep(hold)
        if recover:
            recover()
        self.windows.append((name, began, time.monotonic() - self.health.started))
        print(f"  {name} at {began:.0f} s ({graded_count(self.data)} graded)", flush=True)


def kill_the_scheduler(dask: LocalDask) -> None:
    os.killpg(dask.scheduler.pid, signal.SIGKILL)
    dask.scheduler.wait()


def restart_the_cluster(dask: LocalDask, address: str, jobs: int) -> None:
    """The scheduler started again on its address, and its workers, which end with their
    scheduler (a service manager restarts all)."""
    dask.scheduler = dask._start("scheduler-again", ["scheduler", "--host", "127.0.0.1", "--port",
                                                     address.rsplit(":", 1)[1], "--no-dashboard"])
    dask.workers += [dask._start(f"worker-again-{n}", ["worker", address, "--nthreads", "1", "--no-dashboard",
                                                        "--preload", "autograder.engine.cluster"])
                     for n in range(jobs)]


def lock_the_database(faults: Faults, after: int, uploads: Uploads, n: int) -> list[tuple[int, str] | None]:
    """The database locked for 30 s by another writer, and upload ``n`` sent meanwhile: [None] if
    it was refused (503, nothing stored), else [(its id, its student)], accepted once the lock went."""
    lock = sqlite3.connect(faults.data / "service.db", isolation_level=None, timeout=120)
    meanwhile = []
    with ThreadPoolExecutor(1) as side:
        def lock_and_upload():
            lock.execute("BEGIN IMMEDIATE")
            meanwhile.append(side.submit(uploads.send, n))

        faults.inject("the database locked for 30 s", after, lock_and_upload, lambda: lock.execute("ROLLBACK"), hold=30)
        return [upload.result() for upload in meanwhile]


def faults(args, root: Path, source: Path, students: list[str], tokens: dict[str, str], notebooks: dict) -> int:
    dask = LocalDask(root / "dask", worker_commands=args.jobs, worker_options=["--preload", "autograder.engine.cluster"],
                     wait_for_workers=300)
    address = json.loads(dask.file.read_text())["address"]
    data = root / "data"
    server = Server(data, source, "--scheduler", address).start()
    health = HealthLog(server)
    try:
        uploads = Uploads(server, tokens, students, notebooks, idempotent=True)
        accepted, sent = uploads.burst(args.burst)
        injected = Faults(data, health)
        injected.inject("a worker killed", args.burst // 5, lambda: kill_a_worker(dask))
        injected.inject("the scheduler lost for 20 s, then started again", 2 * args.burst // 5,
                        lambda: kill_the_scheduler(dask), lambda: restart_the_cluster(dask, address, args.jobs),
                        hold=20)
        during_lock = lock_the_database(injected, 3 * args.burst // 5, uploads, args.burst)
        accepted.update(r for r in during_lock if r)
        wait_graded(data, len(accepted))
        took = time.monotonic() - sent
        time.sleep(3)
    finally:
        health.stop()
        server.stop()
        dask.stop()
    graded_once = each_graded_once(data, accepted, during_lock, took)
    return 0 if health_truthful(health, injected.windows) and graded_once else 1


def each_graded_once(data: Path, accepted: dict[int, str], during_lock: list, took: float) -> bool:
    """Whether every accepted submission was graded exactly once (one result each, whatever the
    retries) and no student was charged for the grader's failure; printed."""
    with sqlite3.connect(data / "service.db") as db:
        rows = db.execute("select id, state, status, gradings_started, result is not null from submissions").fetchall()
    done = [r for r in rows if r[1] == "done" and r[4]]
    once = len(done) == len(rows) == len(accepted) and {r[0] for r in rows} == set(accepted)
    charged = [r for r in rows if r[1] == "failed" or (r[1] == "done" and r[2] != "ok")]
    retried = sum(r[3] - 1 for r in rows)
    print(f"faults: {len(done)} of {len(accepted)} accepted submissions graded in {took:.0f} s, one result each: "
          f"{'yes' if once else 'NO'}; gradings started again after a fault: {retried}; "
          f"students charged for the grader's failure: {len(charged)}; an upload during the lock: "
          f"{'refused (503), not stored' if during_lock == [None] else 'accepted once the lock went, and graded'}")
    return once and not charged


def health_truthful(health: HealthLog, windows: list[tuple[str, float, float]]) -> bool:
    """What /health said during each fault and at the end, printed; whether it told the truth: 503
    with the reason during every fault after the first (a worker's loss, which the cluster
    recovers from alone, need not show), and 200 at the end."""
    for name, began, ended in windows:
        print(f"  /health from {name} ({began:.0f} s) to 60 s after it: {health.said(began, ended + 60)}")
    end = health.samples[-1] if health.samples else None
    print(f"  /health at the end: {end[1] if end else '?'} {end[2] if end else ''}")
    truthful = all(any(s[1] == 503 for s in health.samples if began <= s[0] <= ended + 60)
                   for name, began, ended in windows[1:]) and end is not None and end[1] == 200
    print(f"  /health truthful (503 with the reason during the scheduler's loss and the lock, 200 at the end): "
          f"{'yes' if truthful else 'NO'}")
    return truthful


def latency(args, uploads: Uploads) -> None:
    """Notebooks of 01-06 sent one at a time on the idle service: seconds from the upload to the
    score and feedback page, as the student's client sees it."""
    latencies = []
    # run -1: untimed, it waits for the workers' warm-up (started with the service)
    for run in range(-1, args.runs):
        assignment = ASSIGNMENTS[run % len(ASSIGNMENTS)]
        with client(uploads.server, uploads.tokens[uploads.students[run % len(uploads.students)]]) as http:
            sent = time.monotonic()
            notebook = uploads.notebooks[assignment]
            reply = http.post("/api/submissions", json={"notebook": notebook, "filename": "n.ipynb"})
            assert reply.status_code == 202, f"{assignment}: {reply.status_code} {reply.text}"
            view = reply.json()
            while view["state"] != "done":
                time.sleep(0.6)  # under the per-token rate limit (120 a minute)
                view = http.get(f"/api/submissions/{view['id']}").raise_for_status().json()
            page = http.get(view["feedback_url"])  # the feedback page, as the student then opens it
            assert page.status_code == 200, page.text
            took = time.monotonic() - sent
            latencies += [took] if run >= 0 else []
            print(f"  {assignment}: {took:.1f} s, score {view['score']:g}/{view['max_score']:g}"
                  f"{' (warm-up, not counted)' if run < 0 else ''}", flush=True)
    print(f"latency, one at a time ({args.runs} notebooks of 01-06): "
          f"median {statistics.median(latencies):.1f} s, p95 {percentile(latencies, 0.95):.1f} s")


def burst(args, uploads: Uploads) -> int:
    """BURST submissions at once, then until every accepted one is graded: none lost, throughput,
    and the time each waited (the service's own received and graded times); 1 if any was lost."""
    accepted, sent = uploads.burst(args.burst)
    done = wait_all(uploads.server, uploads.tokens, accepted, timeout=3600)
    took = time.monotonic() - sent
    waits = [(datetime.fromisoformat(v["graded"]) - datetime.fromisoformat(v["received"])).total_seconds()
             for v in done.values()]
    statuses = {s: sum(v["status"] == s for v in done.values()) for s in {v["status"] for v in done.values()}}
    print(f"burst: {len(done)} of {len(accepted)} graded ({len(accepted) - len(done)} lost) in {took:.0f} s, "
          f"{len(done) / took * 60:.1f} notebooks a minute; statuses {statuses}")
    print(f"burst: time from upload to feedback: median {statistics.median(waits):.0f} s, "
          f"p95 {percentile(waits, 0.95):.0f} s, max {max(waits):.0f} s")
    return 0 if len(done) == len(accepted) == args.burst else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12, help="one-at-a-time submissions (default: %(default)s)")
    parser.add_argument("--burst", type=int, default=200, help="submissions sent at once (default: %(default)s)")
    parser.add_argument("--students", type=int, default=50, help="default: %(default)s")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="grading workers (default: %(default)s)")
    parser.add_argument("--faults", action="store_true", help="the burst on a Dask cluster, with faults injected")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {args.jobs} grading workers")

    with tempfile.TemporaryDirectory(prefix="service-bench-") as tmp:
        root = Path(tmp)
        students = [f"student{n:03d}" for n in range(args.students)]
        tokens = issue_tokens(root / "data", students)
        notebooks = {a: notebook_text(root / "notebooks", "model", assignment=a) for a in ASSIGNMENTS}
        started = time.monotonic()
        source = root / "source"  # assignments 01-06 only: the service prepares every assignment of its source
        for assignment in ASSIGNMENTS:
            shutil.copytree(REPO / "solutions" / assignment, source / assignment)
        if args.faults:
            return faults(args, root, source, students, tokens, notebooks)
        server = Server(root / "data", source, "--jobs", str(args.jobs)).start()
        print(f"service ready in {time.monotonic() - started:.0f} s (course prepared once)")
        try:
            uploads = Uploads(server, tokens, students, notebooks)
            latency(args, uploads)
            return burst(args, uploads)
        finally:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
