"""The class's mistakes at a glance: ``python -m autograder report RESULTS``.

From a results folder's results.json (or the service's graded submissions), per assignment:
the distribution of the scores (each student's share of their own maximum, by the course's
score rule: lms.course_score), each graded name's failure rate (the share of
graded students with a failing test of that function or class), the mistakes the checks
diagnosed ranked by how many students made them (the hint, and the inputs of one case it was
given for), and the exceptions students' code raised, by type. One HTML page (matplotlib's
figures embedded as PNG, with alt text; nothing fetched, no script: it opens offline), and a
CSV per assignment with the same numbers.

A student counts once per mistake, however many tests show it. Students whose notebook was
missing or invalid are counted apart (they have no test): each rate is of the graded ones.
"""
from __future__ import annotations

import base64
import io
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from autograder.errors import InputError
from autograder.instructor.lms import (NOT_GRADED, Score, grading_record, notebooks_score, refuse_overwriting,
                                      write_csv)
from autograder.instructor.pages import render
from autograder.instructor.verdicts import read_verdict
from autograder.report import NAMES_AS_ON_DISK
from autograder.results import worst_status

SCORE_BINS = 10


@dataclass
class Finding:
    """A mistake (a hint) or a crash (an exception type) of a graded name, and who showed it."""

    name: str
    what: str  # the hint's text, or the exception's type
    students: set[str] = field(default_factory=set)
    example: str = ""  # the inputs of one case where it showed: "query (2, 5, 8), key (2, 5, 8), ..."
    tests: int = 0  # failing tests that showed it, all students together

    def add(self, student: str, example: str) -> None:
        self.students.add(student)
        self.example = self.example or example
        self.tests += 1


@dataclass
class GradedName:
    """A function or class the checks grade, and the graded students who failed one of its tests."""

    name: str
    failed: set[str] = field(default_factory=set)
    not_implemented: set[str] = field(default_factory=set)


@dataclass
class AssignmentReport:
    assignment: str
    scores: dict[str, Score] = field(default_factory=dict)  # graded student -> their score (lms.course_score)
    statuses: Counter = field(default_factory=Counter)  # every student's status
    names: dict[str, GradedName] = field(default_factory=dict)
    mistakes: dict[tuple[str, str], Finding] = field(default_factory=dict)
    crashes: dict[tuple[str, str], Finding] = field(default_factory=dict)

    @property
    def graded(self) -> int:
        return len(self.scores)

    def ranked(self, findings: dict) -> list[Finding]:
        """Most students first, then the one shown in most tests (a mistake that two hints name,
        one in every test and one in the tests of an option, is ranked by the first), then by
        name and text (deterministic)."""
        return sorted(findings.values(), key=lambda f: (-len(f.students), -f.tests, f.name, f.what))

    def top_mistakes(self) -> dict[str, Finding]:
        """Each graded name's mistake that the most students made."""
        top: dict[str, Finding] = {}
        for finding in self.ranked(self.mistakes):
            top.setdefault(finding.name, finding)
        return top

    def failure_rates(self) -> list[tuple[GradedName, float]]:
        return [(n, len(n.failed) / self.graded if self.graded else 0.0)
                for n in sorted(self.names.values(), key=lambda n: (-len(n.failed), n.name))]

    def share(self, finding: Finding) -> float:
        return len(finding.students) / self.graded if self.graded else 0.0


def read_results(results: Path) -> list[dict]:
    """results.json of a results folder (what `grade` wrote)."""
    path = results / "results.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors=NAMES_AS_ON_DISK))
    except FileNotFoundError:
        raise InputError(f"no results.json in {results}: give the RESULTS folder that `grade` wrote") from None
    except (OSError, ValueError) as err:
        raise InputError(f"cannot read {path}: {err}") from err
    if not isinstance(data, list):
        raise InputError(f"{path} is not a list of graded notebooks")
    return data


def class_reports(results: list[dict]) -> list[AssignmentReport]:
    """One report per assignment of ``results`` (results.json's entries: one per notebook)."""
    reports: dict[str, AssignmentReport] = {}
    students: dict[tuple[str, str], list[dict]] = {}
    for result in results:
        students.setdefault((result["assignment"], result["student_id"]), []).append(result)
    for (assignment, student), notebooks in sorted(students.items()):
        report = reports.setdefault(assignment, AssignmentReport(assignment))
        _add_student(report, student, notebooks)
    return [reports[a] for a in sorted(reports)]


def _add_student(report: AssignmentReport, student: str, notebooks: list[dict]) -> None:
    statuses = [nb["status"] for nb in notebooks]
    report.statuses[str(worst_status(statuses))] += 1
    if all(s in NOT_GRADED for s in statuses):
        return
    report.scores[student] = notebooks_score(notebooks)
    for test in (t for nb in notebooks for t in nb.get("tests", []) if not t.get("manual")):
        verdict = read_verdict(test.get("message", ""), test["grade_id"])
        name = report.names.setdefault(verdict.name, GradedName(verdict.name))
        if test["passed"]:
            continue
        name.failed.add(student)
        if verdict.not_implemented:
            name.not_implemented.add(student)
        for hint, example in verdict.hints.items():
            report.mistakes.setdefault((verdict.name, hint), Finding(verdict.name, hint)).add(student, example)
        for exception, example in verdict.exceptions.items():
            report.crashes.setdefault((verdict.name, exception), Finding(verdict.name, exception)).add(student, example)


# --------------------------------------------------------------------------
# the page and the CSVs


def score_counts(report: AssignmentReport) -> list[tuple[float, float, int]]:
    """(low, high, students) for SCORE_BINS equal bins of percent (the last includes 100): each
    student's points as a share of their own maximum (two students' maxima differ while one's
    written answer awaits a person)."""
    counts = [0] * SCORE_BINS
    for score in report.scores.values():
        counts[min(SCORE_BINS - 1, int(SCORE_BINS * score.share))] += 1
    return [(100 * i / SCORE_BINS, 100 * (i + 1) / SCORE_BINS, n) for i, n in enumerate(counts)]


@dataclass
class Figure:
    png: str  # base64
    alt: str


def _png(figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def score_figure(report: AssignmentReport) -> Figure:
    import matplotlib
    matplotlib.use("Agg")  # no display: a file
    import matplotlib.pyplot as plt

    bins = score_counts(report)
    figure, axes = plt.subplots(figsize=(6, 2.6))
    try:
        axes.bar([f"{low:g}–{high:g}" for low, high, _ in bins], [n for _, _, n in bins], color="#4c72b0")
        axes.set_xlabel("score (% of the student's own maximum)")
        axes.set_ylabel("students")
        axes.tick_params(axis="x", labelrotation=45, labelsize=7)
        axes.yaxis.get_major_locator().set_params(integer=True)
        png = _png(figure)
    finally:
        plt.close(figure)
    described = ", ".join(f"{n} from {low:g} to {high:g} %" for low, high, n in bins if n)
    return Figure(png, f"Bar chart of the scores of {report.graded} graded students of {report.assignment}, "
                       f"each in percent of the student's own maximum: {described or 'none'}.")


def failure_figure(report: AssignmentReport) -> Figure | None:
    rates = report.failure_rates()
    if not rates:
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 0.4 * len(rates) + 0.8))
    try:
        axes.barh([n.name for n, _ in rates][::-1], [100 * r for _, r in rates][::-1], color="#dd8452")
        axes.set_xlim(0, 100)
        axes.set_xlabel("graded students with a failing test (%)")
        png = _png(figure)
    finally:
        plt.close(figure)
    described = "; ".join(f"{n.name} {r:.0%}" for n, r in rates)
    return Figure(png, f"Horizontal bar chart of the share of {report.graded} graded students of {report.assignment} "
                       f"who failed a test of each graded name: {described}.")


def render_page(reports: list[AssignmentReport], source: str) -> str:
    pages = [{"report": r, "scores": score_figure(r), "failures": failure_figure(r)} for r in reports]
    return render("class_report.html.j2", pages=pages, source=source)


def csv_rows(report: AssignmentReport) -> list[list]:
    """The page's numbers as rows: section, graded name, what, students, of (graded), share, example."""
    graded = report.graded
    rows = [["score", "", f"{low:g} to {high:g} %", n, graded, _share(n, graded), ""] for low, high, n in score_counts(report)]
    rows += [["status", "", status, n, sum(report.statuses.values()), "", ""] for status, n in sorted(report.statuses.items())]
    rows += [["failure rate", n.name, "failed a test", len(n.failed), graded, _share(len(n.failed), graded), ""]
             for n, _ in report.failure_rates()]
    rows += [["mistake", f.name, f.what, len(f.students), graded, _share(len(f.students), graded), f.example]
             for f in report.ranked(report.mistakes)]
    rows += [["crash", f.name, f.what, len(f.students), graded, _share(len(f.students), graded), f.example]
             for f in report.ranked(report.crashes)]
    return rows


CSV_HEADER = ["section", "graded_name", "what", "students", "of_students", "share", "example"]


def _share(n: int, whole: int) -> str:
    return f"{n / whole:.3f}" if whole else ""


def write_report(results: Path, out: Path) -> list[Path]:
    """``out`` (the HTML page) and ``<out stem>-<assignment>.csv`` beside it; returns them all."""
    reports = class_reports(read_results(results))
    if not reports:
        raise InputError(f"{results / 'results.json'} holds no graded notebook")
    tables = {f"the CSV of {r.assignment}": out.with_name(f"{out.stem}-{r.assignment}.csv") for r in reports}
    refuse_overwriting({"--out": out, **tables}, grading_record(results))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(render_page(reports, str(results)), encoding="utf-8", errors=NAMES_AS_ON_DISK)
    tmp.replace(out)
    written = [out]
    for report, path in zip(reports, tables.values()):
        write_csv(path, CSV_HEADER, csv_rows(report))
        written.append(path)
    return written
