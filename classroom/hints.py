"""The hint rule the tests and benchmarks/hint_coverage.py share: how a failing test's message
reads to a student (case blocks and their hints), and whether a buggy corpus student's hints name
its own mistake, another's, or none (issues 18 and 27)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import classroom
from attention_checks.answers.judging import answer_for, judged
from attention_checks.core import quiet
from attention_checks.registry import checks
from classroom import Results, load_corpus
from classroom.notebook import SourceNotebook

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
    case of the source notebook's test cells: each names one mistake (a hint that the notebook's
    other tests decide, in its words once they all pass too: ``Depends.passed``)."""
    nb = SourceNotebook(assignment)
    hints = set()
    for check in checks(assignment):
        for gid, cell in nb.tests.items():
            if f"{check.function_name}(" not in cell.source:
                continue
            for spec in nb.cases(gid):
                case = judged(check, spec)
                with quiet():
                    for m in answer_for(check).mistakes(case.x, case.spec, case.expected).values():
                        hints |= {m.hint} | ({m.depends.passed} if m.depends else set())
    return hints


QUOTED_CODE = re.compile(r"`[^`]*`")


def foreign_hints(entry: classroom.CorpusEntry, failing: list[str], corpus: list[classroom.CorpusEntry],
                  known: set[str] = frozenset()) -> list[str]:
    """The hint lines of a buggy student's failing messages that name another mistake: the ``# hint:``
    of another file of `corpus` whose mistake differs (neither hint contains the other), or the whole
    hint of a known mistake (`known`, see mistake_hints), on a line that holds neither the student's
    own hint nor a text its ``# also:`` allows. Code the hint quotes (`...`: the student's own lines)
    is not searched: `self.norm(tgt)` names no mistake."""
    mine = _own_texts(entry)
    others = _other_mistakes_hints(entry, corpus)
    hint_lines = [line.strip() for text in failing for line in text.splitlines() if HINT.match(line.strip())]
    found = []
    for line in hint_lines:
        if any(m in line.lower() for m in mine):
            continue
        said = QUOTED_CODE.sub("`…`", line).lower()  # a line of the student's code, quoted, names no mistake
        wrong = sorted(h for h in others if h in said)
        if wrong or line.removeprefix("hint:").strip() in known:
            found.append(f"{entry.name}: {line} (another mistake's hint" + (f": {wrong[0]!r})" if wrong else ")"))
    return found


def _own_texts(entry: classroom.CorpusEntry) -> list[str]:
    """What a hint line of the student's own may hold, lower case: its ``# hint:`` and the texts
    its ``# also:`` allows (none for a file without a hint)."""
    own = (entry.hint or "").lower()
    return [own] + [text.lower() for text in allowed_hints(entry)] if own else []


def _other_mistakes_hints(entry: classroom.CorpusEntry, corpus: list[classroom.CorpusEntry]) -> set[str]:
    """The ``# hint:`` of every other buggy file of `corpus` whose mistake differs from the
    student's (neither hint contains the other: the same mistake, said more or less precisely)."""
    own = (entry.hint or "").lower()
    others = {e.hint.lower() for e in corpus if e.expect == "partial" and e.hint and e.name != entry.name}
    return {h for h in others if not own or (h not in own and own not in h)}


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


def targets_hold(rows: list[Row]) -> bool:
    crashes = sum(r.crash_cases for r in rows)
    return (all(r.hinted == r.students for r in rows) and not any(r.detached for r in rows)
            and (crashes == 0 or sum(r.hinted_crash_cases for r in rows) >= 0.95 * crashes))


def no_foreign_hints(rows: list[Row]) -> bool:
    """Issue 27's target: no buggy student gets another mistake's hint."""
    return not any(r.foreign for r in rows)
