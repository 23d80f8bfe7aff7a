"""Benchmark: a cold `jupyter-book build` of the whole site, then a rebuild with no change.

    .venv/bin/python -m benchmarks.build_site

Builds into a fresh temporary folder (`--path-output`), so the first build starts
without jupyter-cache's executed notebooks, Sphinx's environment or the trained model
that chapters 04 and 08 share (book/learning.py keeps it in COURSE_MODEL_CACHE), as on a
new clone; the second build finds all three. Targets: cold at most 60 s, rebuild at most 10 s
(it exits 1 if a target is missed).
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from classroom.site import build_site

TARGETS = {"cold build": 60.0, "no-change rebuild": 10.0}


def main() -> None:
    seconds = {}
    with tempfile.TemporaryDirectory(prefix="site-bench-") as out:
        for name in TARGETS:
            start = time.perf_counter()
            html = build_site(Path(out), model_cache=Path(out) / "trained-models")
            seconds[name] = time.perf_counter() - start
        pages = sum(1 for _ in html.rglob("*.html"))
    print(f"site: {pages} HTML pages")
    for name, target in TARGETS.items():
        verdict = "met" if seconds[name] <= target else "MISSED"
        print(f"{name:18s} {seconds[name]:6.1f} s   (target {target:.0f} s: {verdict})")
    sys.exit(0 if all(seconds[n] <= t for n, t in TARGETS.items()) else 1)


if __name__ == "__main__":
    main()
