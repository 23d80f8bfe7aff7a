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

It prints the machine's load average first: the figures are only comparable on the same load.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12, help="one-at-a-time submissions (default: %(default)s)")
    parser.add_argument("--burst", type=int, default=200, help="submissions sent at once (default: %(default)s)")
    parser.add_argument("--students", type=int, default=50, help="default: %(default)s")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="grading workers (default: %(default)s)")
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
        server = Server(root / "data", source, "--jobs", str(args.jobs)).start()
        print(f"service ready in {time.monotonic() - started:.0f} s (course prepared once)")
        try:
            latencies = []
            # run -1: untimed, it waits for the workers' warm-up (started with the service)
            for run in range(-1, args.runs):
                assignment = ASSIGNMENTS[run % len(ASSIGNMENTS)]
                with client(server, tokens[students[run % len(students)]]) as http:
                    sent = time.monotonic()
                    reply = http.post("/api/submissions", json={"notebook": notebooks[assignment], "filename": "n.ipynb"})
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

            def send(n: int) -> tuple[int, str] | None:
                student = students[n % len(students)]
                with client(server, tokens[student]) as http:
                    reply = http.post("/api/submissions", json={
                        "notebook": notebooks[ASSIGNMENTS[n % len(ASSIGNMENTS)]], "filename": "n.ipynb"})
                return (reply.json()["id"], student) if reply.status_code == 202 else None

            sent = time.monotonic()
            with ThreadPoolExecutor(16) as pool:
                replies = list(pool.map(send, range(args.burst)))
            accepted = dict(r for r in replies if r)
            print(f"burst: {len(accepted)} of {args.burst} accepted in {time.monotonic() - sent:.1f} s")
            done = wait_all(server, tokens, accepted, timeout=3600)
            took = time.monotonic() - sent
            waits = [(datetime.fromisoformat(v["graded"]) - datetime.fromisoformat(v["received"])).total_seconds()
                     for v in done.values()]
            statuses = {s: sum(v["status"] == s for v in done.values()) for s in {v["status"] for v in done.values()}}
            print(f"burst: {len(done)} of {len(accepted)} graded ({len(accepted) - len(done)} lost) in {took:.0f} s, "
                  f"{len(done) / took * 60:.1f} notebooks a minute; statuses {statuses}")
            print(f"burst: time from upload to feedback: median {statistics.median(waits):.0f} s, "
                  f"p95 {percentile(waits, 0.95):.0f} s, max {max(waits):.0f} s")
            return 0 if len(done) == len(accepted) == args.burst else 1
        finally:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
