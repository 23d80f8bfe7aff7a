"""flash_attention's long case graded again and again: is its verdict the same every time?

The same notebooks, byte for byte, graded ``--runs`` times each by the real command line (one
kernel at a time, ``--jobs 1``, the order alternating between them): the honest tile-by-tile
reference, and corpus students that hold more than a tile (the whole (L, S) score matrix, a whole
row of tiles). For each it prints the memory the sandbox measured for the long case (min, median,
max, in MiB) and the points the case earned each time, against the case's bound.

    .venv/bin/python -m benchmarks.long_case --runs 10

Exits 1 if a notebook's verdict changed from one grading to another, or if the honest notebook
was measured at half the bound or more, or the whole-matrix one at twice the bound or less.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import nbformat

from autograder.results import memory_used
from classroom import Results, grade, load_corpus, make_submission

ASSIGNMENT, NOTEBOOK = "09-attention-at-scale", "attention_at_scale.ipynb"
LONG_CASE, BOUND_MIB = "test_flash_attention_memory", 48  # the case's memory_mib
MIB = 2**20
# name -> flash_attention's cell (None: the reference solution)
CORPUS = {entry.name: entry.cells["flash_attention"] for entry in load_corpus(ASSIGNMENT, cli=True)
          if entry.name in ("flash_full_scores", "flash_row_of_tiles")}
NOTEBOOKS = {"honest": None, "whole_matrix": CORPUS["flash_full_scores"], "row_of_tiles": CORPUS["flash_row_of_tiles"]}


def make_class(root: Path, runs: int) -> None:
    """``runs`` copies of each notebook, named so that the grader's order alternates between them."""
    for run in range(runs):
        for name, cell in NOTEBOOKS.items():
            make_submission(root, f"{run:03d}-{name}", ASSIGNMENT, None if cell is None else {"flash_attention": cell})


def long_case(out: Path, student: str, results: Results) -> tuple[float, float]:
    """(MiB measured, points earned) of ``student``'s long case."""
    nb = nbformat.read(out / "autograded" / student / ASSIGNMENT / NOTEBOOK, 4)
    (cell,) = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == LONG_CASE]
    (test,) = [t for t in results.notebooks[(student, ASSIGNMENT)]["tests"] if t["grade_id"] == LONG_CASE]
    return memory_used(cell) / MIB, test["points"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="gradings of each notebook")
    args = parser.parse_args()
    failed = False
    with tempfile.TemporaryDirectory(prefix="long-case-") as tmp:
        root, out = Path(tmp) / "class", Path(tmp) / "out"
        make_class(root, args.runs)
        run = grade(root, out, "--jobs", "1", "--cell-timeout", "120", "--notebook-timeout", "600")
        if run.returncode != 0:
            print(run.stderr[-3000:])
            return 1
        results = Results.read(out)
        print(f"{ASSIGNMENT}'s long case, bound {BOUND_MIB} MiB, each notebook graded {args.runs} times")
        for name in NOTEBOOKS:
            measured = [long_case(out, f"{run:03d}-{name}", results) for run in range(args.runs)]
            mib = [m for m, _ in measured]
            points = sorted({p for _, p in measured})
            print(f"  {name:13} MiB min {min(mib):6.1f}  median {statistics.median(mib):6.1f}  max {max(mib):6.1f}"
                  f"   points {points}   all: {' '.join(f'{m:.0f}' for m in mib)}")
            failed |= len(points) > 1
            if name == "honest":
                failed |= max(mib) >= BOUND_MIB / 2
            elif name == "whole_matrix":
                failed |= min(mib) <= BOUND_MIB * 2
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
