"""Benchmark: how well failures explain themselves (issue 18).

Grades every buggy student of the in-repository corpus (tests/corpus/<assignment>/*.py
whose header says ``# expect: partial``) with the real command line, as an instructor
would, and prints per assignment:

* students: buggy students graded
* hinted: the share of them whose failing tests carry at least one hint (a ``hint:`` line, or
  the verdict on a forbidden call, which names the mistake itself)
* own hint: the share whose messages contain the hint their corpus file names (``# hint:``)
* other's hint: students with a hint line that names another mistake: the ``# hint:`` of another
  corpus file of the assignment (not one of the same mistake, whose hint contains the student's or
  is contained in it), or the whole hint of a known mistake of the answers, unless the line holds
  the student's own hint or the student's file allows it with ``# also: <text>`` (a hint worded as
  one possibility among others, which that line then contains)
* crash cases: failing cases where the student's code raised, and the share of them with a hint
* long: test messages longer than a screen (more than 40 lines or 3,000 characters)
* detached: hint lines that stand under no case (e.g. after "... and N more failing case(s)")

    .venv/bin/python -m benchmarks.hint_coverage                    # all assignments
    .venv/bin/python -m benchmarks.hint_coverage 04-multi-head --show mha_heads_by_view
    .venv/bin/python -m benchmarks.hint_coverage --check            # exit 1 unless the targets hold
    .venv/bin/python -m benchmarks.hint_coverage --corpus DIR       # another corpus, laid out as tests/corpus
    .venv/bin/python -m benchmarks.hint_coverage --out R; ... --results R   # grade once, tally again
    .venv/bin/python -m benchmarks.hint_coverage 08-decoder --results R --prefix corpus-   # a test_grading run's

Targets: every buggy student hinted, at least 95% of crash cases hinted, no detached hint
(tests/test_grading.py checks them on every assignment), and no student given another mistake's
hint (tests/test_hints.py checks it on every assignment).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import classroom
from classroom import Results, grade, load_corpus, make_submission
from classroom.hints import Row, no_foreign_hints, share, tally, targets_hold

from autograder.layout import SOLUTIONS_DIR, find_assignments

def graded(assignments: list[str], out_dir: Path | None) -> Results:
    """Every buggy student of `assignments`, graded by the command line."""
    with tempfile.TemporaryDirectory() as tmp:
        root, out = Path(tmp) / "submitted", out_dir or Path(tmp) / "results"
        count = 0
        for assignment in assignments:
            for entry in load_corpus(assignment, cli=True):  # graded by the real grader: every student
                if entry.expect == "partial":
                    make_submission(root, entry.name, assignment, entry.cells, added=entry.added)
                    count += 1
        started = time.monotonic()
        process = grade(root, out)
        if process.returncode != 0:
            sys.exit(f"grading failed:\n{process.stderr}")
        print(f"graded {count} notebooks in {time.monotonic() - started:.0f} s", file=sys.stderr)
        return Results.read(out)


def print_table(rows: list[Row]) -> None:
    header = ("assignment", "students", "hinted", "own hint", "other's hint", "crash cases hinted", "long", "detached")

    def cells(r: Row) -> tuple[str, ...]:
        others = len({line.split(":", 1)[0] for line in r.foreign})
        return (r.assignment, str(r.students), share(r.hinted, r.students), share(r.own_hint, r.students),
                str(others), share(r.hinted_crash_cases, r.crash_cases), str(r.long), str(r.detached))

    total = Row("all", *(sum(getattr(r, f) for r in rows) for f in
                         ("students", "hinted", "own_hint", "crash_cases", "hinted_crash_cases", "long", "detached")),
                foreign=[f"{r.assignment}/{line}" for r in rows for line in r.foreign])
    table = [header] + [cells(r) for r in rows] + [cells(total)]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    for i, line in enumerate(table):
        print("  ".join(cell.ljust(w) if j == 0 else cell.rjust(w) for j, (cell, w) in enumerate(zip(line, widths))))
        if i == 0 or i == len(table) - 2:
            print("  ".join("-" * w for w in widths))
    for r in rows:
        if r.unhinted:
            print(f"no hint at all: {r.assignment}: {', '.join(r.unhinted)}")
        for line in r.foreign:
            print(f"another mistake's hint: {r.assignment}/{line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("assignments", nargs="*", help="default: every assignment")
    parser.add_argument("--show", action="append", default=[], help="print this corpus student's failing messages")
    parser.add_argument("--out", type=Path, help="keep the grader's results here")
    parser.add_argument("--results", type=Path, help="tally an earlier --out instead of grading again")
    parser.add_argument("--corpus", type=Path, default=classroom.CORPUS, help="default: tests/corpus")
    parser.add_argument("--prefix", default="", help="with --results: the corpus students' ids start with this "
                        "(tests/test_grading.py grades them as corpus-<name>)")
    parser.add_argument("--check", action="store_true", help="exit 1 unless the targets hold")
    args = parser.parse_args()
    classroom.CORPUS = args.corpus  # load_corpus reads it at each call
    assignments = args.assignments or [a for a in find_assignments(SOLUTIONS_DIR) if (args.corpus / a).is_dir()]
    results = Results.read(args.results) if args.results else graded(assignments, args.out)
    rows = tally(assignments, results, set(args.show), prefix=args.prefix)
    print()
    print_table(rows)
    if args.check and not (targets_hold(rows) and no_foreign_hints(rows)):
        sys.exit("targets missed: every buggy student hinted, >= 95% of crash cases hinted, no detached hint, "
                 "no student given another mistake's hint")


if __name__ == "__main__":
    main()
