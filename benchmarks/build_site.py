"""Benchmark: a cold `jupyter-book build` of the whole site, then a rebuild with no change.

    .venv/bin/python -m benchmarks.build_site

First `python -m coursebuild.models --check` (the chapters' models and results in book/data/ must
be up to date: the build only loads them; train them with `python -m coursebuild.models`).
Then builds into a fresh temporary folder (`--path-output`), so the first build starts without
jupyter-cache's executed notebooks or Sphinx's environment, as on a new clone; the second build
finds both. Targets on a quiet 2-core machine: cold at most 180 s, rebuild at most 10 s (it
exits 1 if a target is missed; a busy machine misses them, and the times say by how much).
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from classroom.site import REPO, build_site

TARGETS = {"cold build": 180.0, "no-change rebuild": 10.0}


def main() -> None:
    check = subprocess.run([sys.executable, "-m", "coursebuild.models", "--check"], cwd=REPO, text=True,
                           capture_output=True)
    if check.returncode:
        sys.exit(f"{check.stdout}the book's results are out of date: run python -m coursebuild.models first")
    load = os.getloadavg()[0]
    seconds = {}
    with tempfile.TemporaryDirectory(prefix="site-bench-") as out:
        for name in TARGETS:
            start = time.perf_counter()
            html = build_site(Path(out))
            seconds[name] = time.perf_counter() - start
        pages = sum(1 for _ in html.rglob("*.html"))
    print(f"site: {pages} HTML pages; load average before the build {load:.1f} on {os.cpu_count()} cores")
    for name, target in TARGETS.items():
        verdict = "met" if seconds[name] <= target else "MISSED"
        print(f"{name:18s} {seconds[name]:6.1f} s   (target {target:.0f} s: {verdict})")
    sys.exit(0 if all(seconds[n] <= t for n, t in TARGETS.items()) else 1)


if __name__ == "__main__":
    main()
