"""A class graded by the working tree and by another revision, alternating: time per notebook, same grades?

Wall and CPU seconds per notebook, their ratio, and whether the two give the same grades byte
for byte, in alternating runs on the same machine.

    .venv/bin/python -m benchmarks.against_baseline --baseline HEAD --students 2 --corpus 3 --runs 3

The class: ``--students`` copies of the reference solution of each assignment, and ``--corpus``
students of each assignment's corpus (tests/corpus/: realistic mistakes, its device bugs first),
so that a change that moves a score or a message shows here. CPU is that of every process the
grading started (``benchmarks.fixed_start.grade``), which other load on the machine inflates
less than the wall time. Exits 1 if the two revisions' grades.csv or results.json differ.
"""
from __future__ import annotations

import csv
import filecmp
import json
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


def main() -> int:
    parser = comparison_parser(__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=2, help="reference students per assignment")
    parser.add_argument("--corpus", type=int, default=3, help="corpus students per assignment")
    parser.add_argument("--assignments", nargs="+", default=find_assignments(REPO / "solutions"))
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    unit = torch_unit()
    with tempfile.TemporaryDirectory(prefix="against-baseline-") as tmp:
        tmp = Path(tmp)
        compared = graders(args.baseline, tmp)
        notebooks = make_class(tmp / "class", args.assignments, args.students, args.corpus)
        print(f"{notebooks} notebooks, --jobs {args.jobs}")
        times: dict[str, list[tuple[float, float | None]]] = {name: [] for name in compared}
        for run in range(args.runs):
            for name, grader in compared.items():
                out = tmp / f"out-{name.replace(' ', '-')}-{run}"
                times[name].append(grade(grader, tmp / "class", out, args.jobs))
                seconds, cpu = times[name][-1]
                print(f"  run {run}: {name:<14} {seconds:6.1f} s, CPU {'-' if cpu is None else f'{cpu:.1f}'} s",
                      flush=True)
        # scores, and every test's message and hint
        before, after = tmp / f"out-{args.baseline.replace(' ', '-')}-0", tmp / "out-working-tree-0"
        differ = [name for name in ("grades.csv", "results.json")
                  if not filecmp.cmp(before / name, after / name, shallow=False)]
        messages = changed_messages(before / "results.json", after / "results.json") if "results.json" in differ else None
        scores = changed_scores(before / "grades.csv", after / "grades.csv") if "grades.csv" in differ else []
    print()
    for what, index in (("wall", 0), ("CPU", 1))[:1 if times[args.baseline][0][1] is None else 2]:
        base, now = (statistics.median(t[index] for t in times[name]) / notebooks for name in compared)
        print(f"{what:<4} per notebook: {args.baseline} {base:.2f} s ({base / unit:.2f} torch), working tree "
              f"{now:.2f} s ({now / unit:.2f} torch), ratio {now / base:.2f}")
    print(f"grades.csv and results.json: {'DIFFERENT: ' + ', '.join(differ) if differ else 'the same, byte for byte'}")
    for student, assignment, old, new in scores:
        print(f"  {student} {assignment}: {old} -> {new}")
    if messages is not None:
        print(f"results.json without the tests' messages: {'the same' if messages[0] else 'DIFFERENT'}; "
              f"{messages[1]} of {messages[2]} tests' messages differ")
    return 1 if differ else 0


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
