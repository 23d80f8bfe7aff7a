"""Benchmark: grade a synthetic class on a local Dask cluster of 1, then N workers (real
`dask scheduler` and `dask worker --nworkers N --nthreads 1 --preload autograder.engine.cluster`
processes, as the README starts them) with
`python -m autograder grade --scheduler`; print the throughput, the throughput per worker and
the scaling efficiency from 1 to N workers, and the local process pool (`--jobs N`) beside it.

    .venv/bin/python -m benchmarks.cluster                         # 24 students of 01, 1 and 2 workers
    .venv/bin/python -m benchmarks.cluster --students 200 --workers 1 4 16 --assignments 03-qkv

The class is benchmarks/grade_class.py's (a quarter each of correct, buggy, stub and broken
notebooks). Each run's wall time includes what a run pays once: the CLI's course, each
worker's copy of it and its warm sandbox (torch imported in each sandbox); on a small class that is
a large share, so the efficiency printed is a lower bound of the steady state.

What to expect on 16 cores: a worker grades one notebook at a time on one core (its kernels
run with OMP_NUM_THREADS=1) and workers share nothing but the scheduler, which hands out a
task in about a millisecond against a few hundred for a notebook; so throughput grows almost
linearly with the workers, and 16 workers on 16 cores should reach 85-95% efficiency on a
class large enough to hide the start (hundreds of notebooks), the rest lost to memory
bandwidth, turbo clocks that drop as more cores work, and the CLI (reading submissions,
writing results) and scheduler, which need a little CPU of their own. More workers than
cores do not help. On a 2-core machine the CLI and the scheduler compete with the two
workers for the same cores, so 2 workers scale worse than they would on machines of their own.

Without 16 cores, ``--simulate SECONDS`` measures the rest: workers that sleep SECONDS per
notebook (a real worker's time on one core, about 0.6 s for these classes on this project's
machine) and answer with results of a real one's size (benchmarks/stand_in_worker.py), so
16 of them fit on 2 cores; the scheduler, the transfers and the CLI's own work are real:

    .venv/bin/python -m benchmarks.cluster --simulate 0.6 --students 400 --workers 4 16

What it cannot show: a real machine's cores slowing each other (memory bandwidth, clocks).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.grade_class import build_class
from classroom.cluster import LocalDask


def start_cluster(folder: Path, workers: int, simulate: float | None = None) -> LocalDask:
    """A scheduler and one `dask worker --nworkers WORKERS` command, as an instructor starts them on a
    machine, once every worker has joined; with ``simulate`` (seconds per notebook), workers that
    only stand in for grading."""
    preload = ["--preload", "autograder.engine.cluster"]  # the grader imported, a sandbox started
    env = None
    if simulate is not None:  # workers that import the plugin's class, and neither grade nor sandbox
        preload = ["--preload", str(Path(__file__).with_name("stand_in_worker.py"))]
        env = dict(os.environ, AUTOGRADER_BENCH_SECONDS=str(simulate))
    return LocalDask(folder, nworkers=workers, worker_options=preload, env=env, logs=False, wait_for_workers=300)


def timed_grade(root: Path, out: Path, *options: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "autograder", "grade", str(root), "--out", str(out), "--quiet", *options],
                   check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=24)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="cluster sizes, the first is the base")
    parser.add_argument("--assignments", nargs="+", default=["01-self-attention"])
    parser.add_argument("--no-local", dest="local", action="store_false", help="skip the local process pool runs")
    parser.add_argument("--simulate", type=float, metavar="SECONDS",
                        help="workers that stand in for grading, SECONDS per notebook (benchmarks/stand_in_worker.py): "
                             "the scaling of what the cluster adds, with more workers than cores; no local runs")
    args = parser.parse_args()
    args.local = args.local and args.simulate is None

    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        tmp = Path(tmp)
        notebooks = len(build_class(tmp / "class", args.students, args.assignments))
        print(f"class: {args.students} students x {len(args.assignments)} assignments = {notebooks} notebooks; "
              f"{os.cpu_count()} cores")
        rates = {}
        base = args.workers[0]
        for n in args.workers:
            cluster = start_cluster(tmp / f"dask-{n}", n, args.simulate)
            try:
                wall = timed_grade(tmp / "class", tmp / f"out-{n}", "--scheduler-file", str(cluster.file))
            finally:
                cluster.stop()
            rates[n] = notebooks / wall
            efficiency = rates[n] / n / (rates[base] / base)
            print(f"dask{' (simulated)' if args.simulate is not None else ''}, {n:2d} workers: {wall:7.1f} s  {rates[n]:6.2f} "
                  f"notebooks/s  {rates[n] / n:6.2f} per worker  "
                  f"scaling efficiency from {base}: {efficiency:6.1%}")
            if args.local:
                wall = timed_grade(tmp / "class", tmp / f"local-{n}", "--jobs", str(n))
                ratio = rates[n] / (notebooks / wall)
                print(f"local pool, --jobs {n:2d}: {wall:7.1f} s  {notebooks / wall:6.2f} notebooks/s; Dask's throughput "
                      f"{ratio:.2f} of the pool's: issue 32's target, within 10% of it: {'met' if ratio >= 0.9 else 'NOT met'}")
        if {4, 16} <= set(rates):
            efficiency = rates[16] / 16 / (rates[4] / 4)
            where = ("simulated" if args.simulate is not None else
                     f"on {os.cpu_count()} cores" + ("" if (os.cpu_count() or 0) >= 16 else ", fewer than the target's 16"))
            print(f"scaling efficiency from 4 to 16 workers, {where}: {efficiency:.2f}: issue 32's target, at least 0.9 "
                  f"on 16 cores: {'met' if efficiency >= 0.9 else 'NOT met'}")


if __name__ == "__main__":
    main()
