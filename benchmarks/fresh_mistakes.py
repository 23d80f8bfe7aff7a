"""Benchmark: what the grader tells students whose mistakes nobody catalogued (issue 59).

Grades every student of the fresh corpus (tests/corpus_fresh/<assignment>/<name>.py: one
mistake each, absent from the answers' catalogue and from tests/corpus) with the real command
line, as one class, and sorts what each student is told by the ``# locus:`` phrases its file
declares (chosen when the mistake was written, before the grader was run on it):

* NAMED    a hint line names the mistake or the step, axis or argument where it lies (it holds
           one of the file's locus phrases)
* GENERIC  hint lines, none with a locus phrase and none a catalogued mistake's: a mechanism
           ("Two tensors do not broadcast ..."), true but not where the mistake is
* VALUES   no hint line: only the failing cases, their values and shapes
* WRONG    a hint that names another mistake: a catalogued mistake's hint (the answers'
           ``mistakes``, as classroom.hints.mistake_hints lists them) without a locus phrase, or
           a verdict of a forbidden call or of tampering, which no fresh mistake makes

A NAMED student may also be shown a catalogued hint that names another mistake: the column
"+wrong" counts them (issue 59 wants a wrong hint for none). The column "+line" counts the
students who are not NAMED but whose hint quotes, as code (`...`), a line their mistake changed:
the lines of the file's cells that the model solution does not hold, where there are at most
MOST_CHANGED of them (a cell rewritten whole has no line that is the mistake's).

    .venv/bin/python -m benchmarks.fresh_mistakes                      # every assignment, --jobs 2
    .venv/bin/python -m benchmarks.fresh_mistakes 09-attention-at-scale --show flash_scale_from_values
    .venv/bin/python -m benchmarks.fresh_mistakes --json > fresh.json  # per mistake and the totals
    .venv/bin/python -m benchmarks.fresh_mistakes --out R; ... --results R   # grade once, sort again
    .venv/bin/python -m benchmarks.fresh_mistakes --grader HEAD        # a commit's grader, not the working tree's

``--grader REV`` grades with the grader (autograder/, attention_checks/, solutions/) of a git
revision, unpacked in a folder of its own, and takes the catalogue of known mistakes from it too:
a figure then belongs to a commit, whatever edits the shared working tree holds meanwhile.

It only reports: the exit status is 1 only when grading failed or a fresh student lost nothing
(a file that is not a mistake, which tests/test_fresh_mistakes.py also catches).
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from classroom import REPO, Results, grade, load_corpus, make_submission
from classroom.hints import FORBIDDEN, HINT
from classroom.notebook import SourceNotebook

from attention_checks.localise import CallRecorder

from autograder.layout import SOLUTIONS_DIR, find_assignments

FRESH = REPO / "tests" / "corpus_fresh"
GRADER = ("autograder", "attention_checks", "solutions", "pyproject.toml")  # what --grader unpacks
CLASSES = ("NAMED", "GENERIC", "VALUES", "WRONG")
# What no message may say of a student the grader did not see do it (issue 59, item 3): a call of
# a forbidden function, a use outside the allowlist, tampering with the checks.
ACCUSATION = re.compile("|".join(map(re.escape, [FORBIDDEN, "outside the allowlist", "tamper",
                                                 "the course's own checks", "private implementations"])), re.I)
SAME_HINT = 40  # a catalogued hint is recognised by its first characters (the rest may name a case's dims)
MOST_CHANGED = 3  # lines a mistake changes, at most, for a hint quoting one of them to count as "+line"


@dataclass
class FreshMistake:
    """One file of the fresh corpus: where it lies and what would name it."""

    assignment: str
    name: str
    graded: str  # the graded name whose mistake it is ("# graded: ...")
    what: str  # the file's first comment: the mistake, in words
    locus: list[str]  # "# locus: a|b|c": a hint holding any of them names or localises the mistake
    changed: list[str] = field(default_factory=list)  # the lines of code it changed (stripped), if few

    @classmethod
    def read(cls, path: Path) -> "FreshMistake":
        text = path.read_text()
        locus = re.search(r"^# locus: (.+?)\s*$", text, re.M)
        graded = re.search(r"^# graded: (\S+)\s*$", text, re.M)
        assert locus and graded, f"{path}: needs '# graded: <name>' and '# locus: <phrase>|<phrase>...' lines"
        what = text.splitlines()[0].removeprefix("#").strip()
        return cls(path.parent.name, path.stem, graded.group(1), what,
                   [p.strip() for p in locus.group(1).split("|") if p.strip()], changed_lines(path.parent.name, text))

    def names_it(self, line: str) -> bool:
        return any(phrase.lower() in line.lower() for phrase in self.locus)

    def quotes_its_line(self, line: str) -> bool:
        return any(f"`{code[:CallRecorder.MOST_CODE]}" in line for code in self.changed)


def changed_lines(assignment: str, text: str) -> list[str]:
    """The lines of code in a fresh file's cells ("# %% cell: <grade id>") that the model solution's
    cells do not hold, stripped; [] where there are more than MOST_CHANGED."""
    parts = re.split(r"^# %% cell: (\S+)\s*$", text, flags=re.M)
    changed = []
    for gid, body in zip(parts[1::2], parts[2::2]):
        known = _solution_lines(assignment, gid)
        changed += [line.strip() for line in body.splitlines()
                    if line.strip() and not line.strip().startswith("#") and line.strip() not in known]
    return changed if len(changed) <= MOST_CHANGED else []


@functools.cache
def _solution_lines(assignment: str, grade_id: str) -> frozenset[str]:
    """The model solution's lines of one cell, stripped (read once per assignment)."""
    return frozenset(line.strip() for line in _solutions(assignment).get(grade_id, "").splitlines())


@functools.cache
def _solutions(assignment: str) -> dict[str, str]:
    return SourceNotebook(assignment).solutions


@dataclass
class Verdict:
    """What one fresh student was told, and its class."""

    assignment: str
    name: str
    graded: str
    points: float
    max_points: float
    kind: str  # one of CLASSES
    quotes_line: bool  # not NAMED, yet a hint quotes a line the mistake changed
    hints: list[str] = field(default_factory=list)  # every distinct hint line of the failing tests
    wrong_hints: list[str] = field(default_factory=list)  # catalogued hints without a locus phrase
    accusations: list[str] = field(default_factory=list)  # lines that accuse the student of what it did not do


def hint_lines(messages: list[str]) -> list[str]:
    """The distinct hint lines of failing tests' messages, without "hint:" ("as above" left out)."""
    lines = (line.strip().removeprefix("hint:").strip() for text in messages for line in text.splitlines()
             if HINT.match(line))
    return list(dict.fromkeys(line for line in lines if line and line != "as above"))


def is_catalogued(line: str, catalogue: set[str]) -> bool:
    return any(hint[:SAME_HINT] in line for hint in catalogue)


def classify(mistake: FreshMistake, messages: list[str], catalogue: set[str]) -> tuple[str, list[str], list[str], list[str]]:
    """(class, hint lines, wrong hint lines, accusations) of a student's failing messages."""
    hints = hint_lines(messages)
    accusations = [line.strip() for text in messages for line in text.splitlines() if ACCUSATION.search(line)]
    wrong = [h for h in hints if is_catalogued(h, catalogue) and not mistake.names_it(h)]
    if accusations:
        kind = "WRONG"
    elif any(mistake.names_it(h) for h in hints):
        kind = "NAMED"
    elif wrong:
        kind = "WRONG"
    else:
        kind = "GENERIC" if hints else "VALUES"
    return kind, hints, wrong, accusations


def fresh_corpus(assignments: list[str]) -> dict[tuple[str, str], FreshMistake]:
    return {(a, path.stem): FreshMistake.read(path) for a in assignments for path in sorted((FRESH / a).glob("*.py"))}


def unpack_grader(revision: str, dest: Path) -> Path:
    """The grader and its source notebooks at a git revision, in ``dest``: ``python -m autograder``
    run from there uses them (the working tree's package comes after the current folder)."""
    archive = subprocess.run(["git", "archive", revision, *GRADER], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def catalogues(grader: Path, assignments: list[str], kept: Path | None, described: str) -> dict[str, set[str]]:
    """assignment -> every hint of its catalogued mistakes (classroom.hints.mistake_hints), as the
    answers in ``grader`` give them (its attention_checks comes first on the path). ``kept``: a
    results folder, where they are kept beside the grades for the same grader's next tally (they
    take minutes to list)."""
    saved = kept / "fresh_catalogue.json" if kept else None
    if saved and saved.exists():
        data = json.loads(saved.read_text())
        if data["grader"] == described and set(assignments) <= set(data["catalogue"]):
            return {a: set(data["catalogue"][a]) for a in assignments}
    code = ("import json, sys; from classroom.hints import mistake_hints; "
            "print(json.dumps({a: sorted(mistake_hints(a)) for a in sys.argv[1:]}))")
    process = subprocess.run([sys.executable, "-c", code, *assignments], cwd=grader, capture_output=True, text=True,
                             env=dict(os.environ, PYTHONPATH=str(REPO)))
    if process.returncode != 0:
        sys.exit(f"listing the catalogued mistakes failed:\n{process.stderr}")
    listed = json.loads(process.stdout.splitlines()[-1])
    if saved and "working tree" not in described:  # the working tree's answers may change meanwhile
        saved.write_text(json.dumps(dict(grader=described, catalogue=listed)))
    return {a: set(hints) for a, hints in listed.items()}


def graded(assignments: list[str], jobs: int, out_dir: Path | None, grader: Path, *options: str) -> Results:
    """Every fresh student of `assignments`, graded as one class by the command line of ``grader``,
    with ``options`` (``--no-localise``: no second run that localises the failures)."""
    with tempfile.TemporaryDirectory() as tmp:
        root, out = Path(tmp) / "submitted", out_dir or Path(tmp) / "results"
        count = 0
        for assignment in assignments:
            for entry in load_corpus(assignment, cli=True, corpus=FRESH):
                make_submission(root, entry.name, assignment, entry.cells, added=entry.added)
                count += 1
        started = time.monotonic()
        process = grade(root, out, "--jobs", str(jobs), *options, cwd=grader)
        if process.returncode != 0:
            sys.exit(f"grading failed:\n{process.stderr}")
        print(f"graded {count} notebooks in {time.monotonic() - started:.0f} s (--jobs {jobs})", file=sys.stderr)
        return Results.read(out)


def verdicts(corpus: dict[tuple[str, str], FreshMistake], results: Results,
             catalogue: dict[str, set[str]]) -> list[Verdict]:
    found = []
    for (assignment, name), mistake in corpus.items():
        notebook = results.notebooks.get((name, assignment))
        if notebook is None:
            sys.exit(f"{assignment}/{name}: not in the grader's results")
        failing = [t["message"] for t in notebook["tests"] if t["passed"] is False]
        kind, hints, wrong, accusations = classify(mistake, failing, catalogue[assignment])
        quotes = kind != "NAMED" and any(mistake.quotes_its_line(h) for h in hints)
        found.append(Verdict(assignment, name, mistake.graded, float(notebook["score"]), float(notebook["max_score"]),
                             kind, quotes, hints, wrong, accusations))
    return found


def totals(found: list[Verdict]) -> dict[str, dict[str, int]]:
    """assignment (and "all") -> mistakes, each class's count, and "+wrong" (NAMED with a wrong hint beside)."""
    rows: dict[str, Counter] = {}
    for v in found:
        for key in (v.assignment, "all"):
            row = rows.setdefault(key, Counter())
            row["mistakes"] += 1
            row[v.kind] += 1
            row["+wrong"] += v.kind == "NAMED" and bool(v.wrong_hints)
            row["+line"] += v.quotes_line
            row["full points"] += v.points >= v.max_points
    order = sorted(rows, key=lambda key: key == "all")  # the assignments as graded, then "all"
    return {key: {k: rows[key][k] for k in ("mistakes", *CLASSES, "+wrong", "+line", "full points")} for key in order}


def share(part: int, whole: int) -> str:
    return f"{part} ({100 * part / whole:.0f}%)" if whole else "-"


def print_report(found: list[Verdict], table: dict[str, dict[str, int]]) -> None:
    width = max(len(f"{v.assignment}/{v.name}") for v in found)
    for v in found:
        shown = " | ".join(v.accusations + v.hints) or "(no hint)"
        print(f"{v.kind + '+line' * v.quotes_line:<12} {v.points:5.2f}/{v.max_points:<4g} {v.assignment}/{v.name:<{width - len(v.assignment) - 1}}  "
              f"{shown[:300]}")
    print()
    header = ("assignment", "mistakes", *CLASSES, "+wrong", "+line", "full points")
    lines = [header] + [(key, str(row["mistakes"]), *(share(row[c], row["mistakes"]) for c in CLASSES),
                         str(row["+wrong"]), str(row["+line"]), str(row["full points"])) for key, row in table.items()]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for i, line in enumerate(lines):
        print("  ".join(cell.ljust(w) if j == 0 else cell.rjust(w) for j, (cell, w) in enumerate(zip(line, widths))))
        if i == 0 or i == len(lines) - 2:
            print("  ".join("-" * w for w in widths))
    every = table["all"]
    print(f"named, or quoting a line the mistake changed (+line): "
          f"{share(every['NAMED'] + every['+line'], every['mistakes'])}")
    for v in found:
        for line in v.accusations + v.wrong_hints:
            print(f"wrong hint: {v.assignment}/{v.name} ({v.kind}): {line[:300]}")


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()


def describe_grader(commit: str | None) -> str:
    """The commit whose grader graded, or the working tree's (on which commit, with what edits)."""
    if commit:
        return commit
    edited = git("status", "--porcelain", "--untracked-files=no", "--", *GRADER)
    return f"working tree on {git('rev-parse', '--short', 'HEAD')}" + (" with uncommitted edits" if edited else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("assignments", nargs="*", help="default: every assignment with a fresh corpus")
    parser.add_argument("--jobs", type=int, default=2, help="the grader's workers (default 2)")
    parser.add_argument("--show", action="append", default=[], help="print this fresh student's failing messages")
    parser.add_argument("--out", type=Path, help="keep the grader's results here")
    parser.add_argument("--results", type=Path, help="sort an earlier --out instead of grading again")
    parser.add_argument("--json", action="store_true", help="print every verdict and the totals as JSON")
    parser.add_argument("--no-localise", action="store_true", help="grade with --no-localise: no second run "
                        "of a failing notebook that localises its mistakes (a grader before it has none)")
    parser.add_argument("--grader", metavar="REV", help="grade with this git revision's grader (default: the working tree)")
    args = parser.parse_args()
    assignments = args.assignments or [a for a in find_assignments(SOLUTIONS_DIR) if (FRESH / a).is_dir()]
    corpus = fresh_corpus(assignments)
    commit = git("rev-parse", "--short", args.grader) if args.grader else None  # HEAD may move while grading
    described = describe_grader(commit)
    with tempfile.TemporaryDirectory() as tmp:
        grader = unpack_grader(commit, Path(tmp)) if commit else REPO
        options = ["--no-localise"] if args.no_localise else []
        results = Results.read(args.results) if args.results else graded(assignments, args.jobs, args.out, grader,
                                                                          *options)
        found = verdicts(corpus, results, catalogues(grader, assignments, args.out or args.results, described))
    table = totals(found)
    if args.json:
        json.dump(dict(grader=described, totals=table, mistakes=[asdict(v) for v in found]),
                  sys.stdout, indent=1, ensure_ascii=False)
        print()
    else:
        print_report(found, table)
        print(f"grader: {described}")
    for name in args.show:
        for (assignment, student), _ in corpus.items():
            if student == name:
                notebook = results.notebooks[(student, assignment)]
                print(f"\n===== {assignment}/{student}: {corpus[(assignment, student)].what}")
                print("\n-----\n".join(t["message"] for t in notebook["tests"] if t["passed"] is False))
    if table["all"]["full points"]:
        sys.exit("a fresh student lost nothing: its file is not a mistake")


if __name__ == "__main__":
    main()
