"""Write the results: grades.csv, results.json, feedback/<student>/<assignment>/<notebook>.html
and autograded/<student>/<assignment>/<notebook>.ipynb (the graded notebooks, hidden tests
included: for the instructor's formgrader, never for students).

Files are written atomically (a temporary file, then a rename), so a run that is
killed leaves either the previous results or the new ones, never half a file.
"""
from __future__ import annotations

import csv
import html
import io
import json
import os
import re
import shutil
import sys
from dataclasses import replace
from itertools import groupby
from math import fsum
from pathlib import Path

from autograder.results import NotebookResult, worst_status

# score and max_score: the autograded tests' points; written_points: the written answers' points
# (graded by hand in formgrader, not in max_score); to_grade_by_hand: those that await a person.
# late: "yes" when the LMS marked the submission late (collect's report), reported, not penalised.
GRADES_COLUMNS = ["student_id", "assignment", "score", "max_score", "status", "reason", "written_points",
                  "to_grade_by_hand", "late"]
# A folder name that is not UTF-8 (Python holds its bytes as surrogates) is written back as
# the same bytes, instead of failing the whole report.
NAMES_AS_ON_DISK = "surrogateescape"


# A cell that starts with one of these is a formula (or, with a tab or a carriage return, may
# become one) when Excel or LibreOffice opens the file: a student's name "=HYPERLINK(...)".
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?|-")


def spreadsheet_cell(value) -> str:
    """A CSV cell that a spreadsheet shows as text, as OWASP recommends against CSV injection:
    a cell that starts like a formula gets a leading ``'`` (a plain number such as ``-1``, or a
    lone ``-``, is left alone), and so does a cell that starts with ``'`` itself, so that
    ``read_cell`` gives back exactly what was written."""
    text = str(value)
    if text.startswith(FORMULA_STARTS + ("'",)) and not _PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text


def read_cell(text: str) -> str:
    """A cell as ``spreadsheet_cell`` was given it (one leading ``'`` removed)."""
    return text[1:] if text.startswith("'") else text


def csv_text(header: list[str], rows) -> str:
    """CSV with every cell made safe for a spreadsheet (``spreadsheet_cell``)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([spreadsheet_cell(cell) for cell in row] for row in rows)
    return buffer.getvalue()


# The course's MathJax (tools/web_assets.py installs it, from npm), for the feedback pages written
# here, which are opened from these files (no CDN): a copy beside them, feedback/.mathjax/ (no
# student's folder starts with a dot), that each page loads with the service's configuration (TeX,
# and MathJax's Safe extension). Its SVG output: the glyphs are in the script itself, so no web
# font is fetched (a browser may refuse those to a page opened from a file).
WEB_ASSETS = Path(os.environ.get("COURSE_WEB_ASSETS") or Path(sys.prefix) / "share" / "course-web-assets")
MATH_FOLDER = ".mathjax"
MATH_FILES = ("tex-svg.js", "ui/safe.js", "input/tex/extensions", "LICENSE")  # what the pages load, by demand
MATH_CONFIG = Path(__file__).parent / "service" / "static" / "mathjax-config.js"
PAGE_MATH = (f'<script src="../../{MATH_FOLDER}/mathjax-config.js"></script>'  # from <student>/<assignment>/
             f'<script src="../../{MATH_FOLDER}/tex-svg.js"></script>')


def _copy_mathjax(feedback: Path) -> bool:
    """The course's MathJax copied into ``feedback``/.mathjax; False where it is not installed
    (the pages then show their math as TeX, and this says so)."""
    mathjax = WEB_ASSETS / "mathjax"
    if not (MATH_CONFIG.is_file() and all((mathjax / name).exists() for name in MATH_FILES)):
        print(f"note: the course's MathJax is not in {mathjax} (python tools/web_assets.py installs it): "
              "the feedback pages show their math as TeX", file=sys.stderr)
        return False
    for name in MATH_FILES:
        source, copy = mathjax / name, feedback / MATH_FOLDER / name
        copy.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if source.is_dir() else shutil.copyfile)(source, copy)
    shutil.copyfile(MATH_CONFIG, feedback / MATH_FOLDER / "mathjax-config.js")
    return True


def _with_math(page: str) -> str:
    """``page`` loading the copy of MathJax, at the end of its body (after the page's own content)."""
    before, end, after = page.rpartition("</body>")
    return before + PAGE_MATH + end + after if end else page + PAGE_MATH


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8", errors=NAMES_AS_ON_DISK)
    os.replace(tmp, path)


def _number(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(x, 2)


class ResultsWriter:
    """Collects results as they come and writes the results folder at the end."""

    def __init__(self, out_dir: Path, late: set[tuple[str, str]] = frozenset()):
        """``late``: the (student id, assignment) that the LMS marked late."""
        self.out_dir = out_dir
        self.late = late
        self.results: list[NotebookResult] = []
        self.staging = out_dir / ".feedback-staging"
        self.autograded = out_dir / ".autograded-staging"
        out_dir.mkdir(parents=True, exist_ok=True)
        for staging in (self.staging, self.autograded):
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir()
        self.math = _copy_mathjax(self.staging)

    def add(self, result: NotebookResult, feedback_html: str | None) -> None:
        result = replace(result, late=(result.student_id, result.assignment) in self.late)
        folder = Path(result.student_id, result.assignment)
        target = self.staging / folder / f"{result.notebook}.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        page = (_with_math(feedback_html) if self.math else feedback_html) if feedback_html else _status_page(result)
        target.write_text(page, encoding="utf-8", errors=NAMES_AS_ON_DISK)
        if result.autograded:  # written now, not kept: a class's notebooks would fill the memory
            target = self.autograded / folder / f"{result.notebook}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(result.autograded, encoding="utf-8", errors=NAMES_AS_ON_DISK)
            result = replace(result, autograded="")
        self.results.append(result)

    def finish(self) -> None:
        self.results.sort(key=lambda r: (r.student_id, r.assignment, r.notebook))
        _write_atomically(self.out_dir / "results.json",
                          json.dumps([r.to_json() for r in self.results], indent=2) + "\n")
        _write_atomically(self.out_dir / "grades.csv", grades_csv(self.results))
        _replace_folder(self.staging, self.out_dir / "feedback")
        _replace_folder(self.autograded, self.out_dir / "autograded")


def _replace_folder(new: Path, target: Path) -> None:
    old = target.with_name(f".{target.name}-old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    new.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def grades_csv(results: list[NotebookResult]) -> str:
    """One row per student and assignment: the sum over the assignment's notebooks."""
    rows = []
    for (student_id, assignment), group in groupby(results, key=lambda r: (r.student_id, r.assignment)):
        group = list(group)
        reasons = [r.reason if len(group) == 1 else f"{r.notebook}: {r.reason}" for r in group if r.reason]
        rows.append([student_id, assignment,
                     _number(fsum(r.score for r in group)), _number(fsum(r.max_score for r in group)),
                     worst_status(r.status for r in group), "; ".join(reasons),
                     _number(fsum(r.written_points for r in group)), _number(fsum(r.to_grade_by_hand for r in group)),
                     "yes" if any(r.late for r in group) else ""])
    return csv_text(GRADES_COLUMNS, rows)


def _status_page(result: NotebookResult) -> str:
    """Feedback for a notebook that nbgrader could not grade: what happened and why."""
    title = html.escape(f"{result.assignment}/{result.notebook}.ipynb: {result.status}")
    return (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{title}</title></head>\n"
            f"<body><h1>{title}</h1>\n<p>Score: {_number(result.score)} / {_number(result.max_score)}</p>\n"
            f"<p>{html.escape(result.reason or 'No further details.')}</p></body></html>\n")
