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

    .venv/bin/python benchmarks/hint_coverage.py                    # all assignments
    .venv/bin/python benchmarks/hint_coverage.py 04-multi-head --show mha_heads_by_view
    .venv/bin/python benchmarks/hint_coverage.py --check            # exit 1 unless the targets hold
    .venv/bin/python benchmarks/hint_coverage.py --corpus DIR       # another corpus, laid out as tests/corpus
    .venv/bin/python benchmarks/hint_coverage.py --out R; ... --results R   # grade once, tally again
    .venv/bin/python benchmarks/hint_coverage.py 08-decoder --results R --prefix corpus-   # a test_grading run's

Targets: every buggy student hinted, at least 95% of crash cases hinted, no detached hint
(tests/test_grading.py checks them on every assignment), and no student given another mistake's
hint (tests/test_hints.py checks it on 07 and 08).
"""
from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import classroom  # noqa: E402
from classroom import Results, grade, load_corpus, make_submission  # noqa: E402

from autograder.course import find_assignments  # noqa: E402

SCREEN_LINES, SCREEN_CHARS = 40, 3000
CASE = re.compile(r"^case \d+:")
HINT = re.compile(r"^\s*hint:")
RAISED = re.compile(r"^\s+(\S+ : )?raised \w")  # run_check's line for a case whose code raised
FORBIDDEN = "which this exercise asks you to write yourself"  # the verdict on a forbidden call


@dataclass
class Message:
    """One failing test's message, read as a student reads it: case blocks and their hints."""

    text: str
    crash_cases: int = 0
    hinted_crash_cases: int = 0
    hints: int = 0
    detached: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str) -> "Message":
        message = cls(text)
        block: list[str] | None = None  # the lines of the case being read; None: outside any case

        def close(lines: list[str] | None):
            if lines and any(RAISED.match(line) for line in lines):
                message.crash_cases += 1
                message.hinted_crash_cases += any(HINT.match(line) for line in lines)

        for line in text.splitlines():
            if CASE.match(line):
                close(block)
                block = []
            elif block is not None and line.startswith("    "):
                block.append(line)
            else:
                close(block)
                block = None
            if HINT.match(line):
                message.hints += 1
                if block is None:
                    message.detached.append(line.strip())
            elif FORBIDDEN in line:  # a verdict on the whole test, under no case
                message.hints += 1
        close(block)
        return message

    @property
    def long(self) -> bool:
        return len(self.text.splitlines()) > SCREEN_LINES or len(self.text) > SCREEN_CHARS


@dataclass
class Row:
    assignment: str
    students: int = 0
    hinted: int = 0
    own_hint: int = 0
    crash_cases: int = 0
    hinted_crash_cases: int = 0
    long: int = 0
    detached: int = 0
    unhinted: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)  # "student: hint line (another mistake's hint)"


def share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f}%)" if whole else "-"


def allowed_hints(entry: classroom.CorpusEntry) -> list[str]:
    """The texts a student's file allows in its hint lines besides its own hint (``# also: <text>``)."""
    path = classroom.CORPUS / entry.assignment / f"{entry.name}.py"
    return re.findall(r"^# also: (.+?)\s*$", path.read_text(), re.M) if path.exists() else []


def mistake_hints(assignment: str) -> set[str]:
    """Every hint a known mistake of the assignment's checks gives (answers' ``mistakes``), on every
    case of the source notebook's test cells: each names one mistake."""
    from notebook_harness import SourceNotebook

    from attention_checks.answers.judging import answer_for, judged
    from attention_checks.core import quiet
    from attention_checks.registry import checks

    nb = SourceNotebook(assignment)
    hints = set()
    for check in checks(assignment):
        for gid, cell in nb.tests.items():
            if f"{check.function_name}(" not in cell.source:
                continue
            for spec in nb.cases(gid):
                case = judged(check, spec)
                with quiet():
                    hints |= {m.hint for m in answer_for(check).mistakes(case.x, case.spec, case.expected).values()}
    return hints


def foreign_hints(entry: classroom.CorpusEntry, failing: list[str], corpus: list[classroom.CorpusEntry],
                  known: set[str] = frozenset()) -> list[str]:
    """The hint lines of a buggy student's failing messages that name another mistake: the ``# hint:``
    of another file of `corpus` whose mistake differs (neither hint contains the other), or the whole
    hint of a known mistake (`known`, see mistake_hints), on a line that holds neither the student's
    own hint nor a text its ``# also:`` allows."""
    own = (entry.hint or "").lower()
    mine = [own] + [text.lower() for text in allowed_hints(entry)] if own else []
    others = {e.hint.lower() for e in corpus if e.expect == "partial" and e.hint and e.name != entry.name}
    others = {h for h in others if not own or (h not in own and own not in h)}
    found = []
    for text in failing:
        for line in text.splitlines():
            line = line.strip()
            if not HINT.match(line) or any(m in line.lower() for m in mine):
                continue
            wrong = sorted(h for h in others if h in line.lower())
            if wrong or line.removeprefix("hint:").strip() in known:
                found.append(f"{entry.name}: {line} (another mistake's hint"
                             + (f": {wrong[0]!r})" if wrong else ")"))
    return found


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


def tally(assignments: list[str], results: Results, show: set[str], prefix: str = "") -> list[Row]:
    """The table's rows; corpus students are graded under `prefix` + their file's name."""
    rows = []
    for assignment in assignments:
        row = Row(assignment)
        corpus = load_corpus(assignment, cli=True)
        known = mistake_hints(assignment)
        for entry in corpus:
            notebook = results.notebooks.get((prefix + entry.name, assignment))
            if entry.expect != "partial" or notebook is None:
                continue
            failing = [t["message"] for t in notebook["tests"] if t["passed"] is False]  # not written answers (None)
            messages = [Message.parse(text) for text in failing]
            row.students += 1
            hinted = any(m.hints for m in messages)
            row.hinted += hinted
            if not hinted:
                row.unhinted.append(entry.name)
            row.own_hint += bool(entry.hint) and any(entry.hint.lower() in t.lower() for t in failing)
            row.foreign += foreign_hints(entry, failing, corpus, known)
            for m in messages:
                row.crash_cases += m.crash_cases
                row.hinted_crash_cases += m.hinted_crash_cases
                row.long += m.long
                row.detached += len(m.detached)
            if entry.name in show:
                print(f"\n===== {assignment}/{entry.name} (expects hint: {entry.hint})")
                print("\n-----\n".join(failing) or "(no failing test)")
        rows.append(row)
    return rows


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


def targets_hold(rows: list[Row]) -> bool:
    crashes = sum(r.crash_cases for r in rows)
    return (all(r.hinted == r.students for r in rows) and not any(r.detached for r in rows)
            and (crashes == 0 or sum(r.hinted_crash_cases for r in rows) >= 0.95 * crashes))


def no_foreign_hints(rows: list[Row]) -> bool:
    """Issue 27's target: no buggy student gets another mistake's hint."""
    return not any(r.foreign for r in rows)


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
    assignments = args.assignments or [a for a in find_assignments(REPO / "solutions") if (args.corpus / a).is_dir()]
    results = Results.read(args.results) if args.results else graded(assignments, args.out)
    rows = tally(assignments, results, set(args.show), prefix=args.prefix)
    print()
    print_table(rows)
    if args.check and not (targets_hold(rows) and no_foreign_hints(rows)):
        sys.exit("targets missed: every buggy student hinted, >= 95% of crash cases hinted, no detached hint, "
                 "no student given another mistake's hint")


if __name__ == "__main__":
    main()
