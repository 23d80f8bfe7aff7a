"""Two classes graded by the working tree and by another revision, alternating: time per notebook, same grades?

Wall and CPU seconds per notebook, their ratio, and whether the two give the same grades byte
for byte, in alternating runs on the same machine, for each of two classes:

- **all correct**: ``--students`` copies of the reference solution of each assignment (the
  class whose cost per notebook issue 62's target is set on);
- **mixed**: the same students, and ``--corpus`` students of each assignment's corpus
  (tests/corpus/: realistic mistakes, its device bugs first), so that a change that moves a score
  or a message shows here (``--corpus 0``: the all-correct class alone).

    .venv/bin/python -m benchmarks.against_baseline --baseline HEAD --students 2 --corpus 3 --runs 3

Each run grades both classes with both graders, one after the other, so that load on the machine
weighs on all four alike. CPU is that of every process the grading started
(``benchmarks.fixed_start.grade``), which other load on the machine inflates less than the wall
time. Exits 1 if the two revisions' grades.csv or results.json differ for either class.
"""
from __future__ import annotations

import csv
import filecmp
import json
import os
import statistics
import tempfile
from pathlib import Path

from autograder.layout import find_assignments
from benchmarks.fixed_start import comparison_parser, grade, graders, torch_unit
from classroom import REPO, load_corpus, make_submission


def make_class(root: Path, assignments: list[str], students: int, corpus: int) -> int:
    """The class's folder; returns its number of notebooks."""
    notebooks = 0
    for assignment in assignments:
        for n in range(students):
            make_submission(root, f"reference{n}", assignment)
        # the device bugs first: the meta run that finds them is where grading spends the most
        chosen = sorted(load_corpus(assignment, cli=True), key=lambda e: not e.name.startswith("device_"))[:corpus]
        for entry in chosen:
            make_submission(root, f"corpus-{entry.name}", assignment, entry.cells, added=entry.added)
        notebooks += students + len(chosen)
    return notebooks


Times = dict[str, list[tuple[float, float | None]]]  # grader -> (wall, CPU) of each run


def main() -> int:
    parser = comparison_parser(__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=2, help="reference students per assignment")
    parser.add_argument("--corpus", type=int, default=3, help="corpus students per assignment, in the mixed class")
    parser.add_argument("--assignments", nargs="+", default=find_assignments(REPO / "solutions"))
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    unit = torch_unit()
    print(f"load average {' '.join(f'{load:.1f}' for load in os.getloadavg())} on {os.cpu_count()} cores")
    differ = False
    with tempfile.TemporaryDirectory(prefix="against-baseline-") as tmp:
        tmp = Path(tmp)
        compared = graders(args.baseline, tmp)
        classes = {"all correct": make_class(tmp / "all-correct", args.assignments, args.students, 0)}
        if args.corpus:
            classes["mixed"] = make_class(tmp / "mixed", args.assignments, args.students, args.corpus)
        print(", ".join(f"{name}: {n} notebooks" for name, n in classes.items()) + f"; --jobs {args.jobs}")
        times: dict[str, Times] = {name: {grader: [] for grader in compared} for name in classes}
        for run in range(args.runs):
            for name in classes:
                for grader, path in compared.items():
                    seconds, cpu = grade(path, tmp / folder(name), tmp / folder(f"out-{name}-{grader}-{run}"),
                                         args.jobs)
                    times[name][grader].append((seconds, cpu))
                    print(f"  run {run}: {name:<11} {grader:<14} {seconds:6.1f} s, "
                          f"CPU {'-' if cpu is None else f'{cpu:.1f}'} s", flush=True)
        print()
        for name, notebooks in classes.items():
            before = tmp / folder(f"out-{name}-{args.baseline}-0")
            after = tmp / folder(f"out-{name}-working tree-0")
            differ = report(name, notebooks, times[name], args.baseline, unit, before, after) or differ
    print(f"load average after: {' '.join(f'{load:.1f}' for load in os.getloadavg())}")
    return 1 if differ else 0


def folder(name: str) -> str:
    return name.replace(" ", "-")


def report(name: str, notebooks: int, times: Times, baseline: str, unit: float, before: Path, after: Path) -> bool:
    """Print one class's medians per notebook, their ratios, and whether the outputs are the same;
    True where they differ."""
    print(f"{name} ({notebooks} notebooks):")
    for what, index in (("wall", 0), ("CPU", 1))[:1 if times[baseline][0][1] is None else 2]:
        base, now = (statistics.median(t[index] for t in times[grader]) / notebooks for grader in times)
        print(f"  {what:<4} per notebook: {baseline} {base:.3f} s ({base / unit:.3f} torch), working tree "
              f"{now:.3f} s ({now / unit:.3f} torch), ratio {now / base:.2f}")
    # scores, and every test's message and hint
    differ = [output for output in ("grades.csv", "results.json")
              if not filecmp.cmp(before / output, after / output, shallow=False)]
    print(f"  grades.csv and results.json: {'DIFFERENT: ' + ', '.join(differ) if differ else 'the same, byte for byte'}")
    if "grades.csv" in differ:
        for student, assignment, old, new in changed_scores(before / "grades.csv", after / "grades.csv"):
            print(f"    {student} {assignment}: {old} -> {new}")
    if "results.json" in differ:
        same, changed, tests = changed_messages(before / "results.json", after / "results.json")
        print(f"  results.json without the tests' messages: {'the same' if same else 'DIFFERENT'}; "
              f"{changed} of {tests} tests' messages differ")
    for pages in ("feedback", "autograded"):  # told, not failed on: a page's wording may change on purpose
        changed, total = changed_files(before / pages, after / pages)
        print(f"  {pages}/: {f'{len(changed)} of {total} files differ: ' + ', '.join(changed[:5]) if changed else f'all {total} files the same'}")
    return bool(differ)


def changed_files(before: Path, after: Path) -> tuple[list[str], int]:
    """The files of ``before`` and ``after`` (relative paths) that differ or are only in one, and how
    many there are in all."""
    files = {path.relative_to(folder) for folder in (before, after) for path in folder.rglob("*") if path.is_file()}
    return sorted(str(f) for f in files if not (before / f).is_file() or not (after / f).is_file()
                  or not filecmp.cmp(before / f, after / f, shallow=False)), len(files)


def changed_scores(before: Path, after: Path) -> list[tuple[str, str, str, str]]:
    """The students whose score or status differs: (student, assignment, "score status" before, after)."""
    def rows(path: Path) -> dict[tuple[str, str], str]:
        with path.open(newline="") as file:
            return {(r["student_id"], r["assignment"]): f"{r['score']}/{r['max_score']} {r['status']}"
                    for r in csv.DictReader(file)}
    old, new = rows(before), rows(after)
    return [(*key, old.get(key, "-"), new.get(key, "-")) for key in sorted(old.keys() | new.keys())
            if old.get(key) != new.get(key)]


def changed_messages(before: Path, after: Path) -> tuple[bool, int, int]:
    """(whether the two results.json are the same without their tests' messages, how many messages
    differ, how many tests there are): a change of wording alone leaves every score and status.
    Tests are matched by student, assignment, notebook and grade id (a test added or removed is a
    message that differs)."""
    def split(path: Path) -> tuple[list, dict[tuple, str | None]]:
        notebooks = json.loads(path.read_text())
        texts = {(notebook["student_id"], notebook["assignment"], notebook["notebook"], test["grade_id"]):
                 test.pop("message", None) for notebook in notebooks for test in notebook.get("tests", [])}
        return notebooks, texts
    (old, old_texts), (new, new_texts) = split(before), split(after)
    keys = old_texts.keys() | new_texts.keys()
    return old == new, sum(old_texts.get(k) != new_texts.get(k) for k in keys), len(new_texts)


if __name__ == "__main__":
    raise SystemExit(main())
