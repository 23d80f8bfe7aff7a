"""Write the results: grades.csv, results.json and feedback/<student>/<assignment>/<notebook>.html.

Files are written atomically (a temporary file, then a rename), so a run that is
killed leaves either the previous results or the new ones, never half a file.
"""
from __future__ import annotations

import csv
import html
import io
import json
import os
import shutil
from itertools import groupby
from pathlib import Path

from .results import NotebookResult, worst_status

GRADES_COLUMNS = ["student_id", "assignment", "score", "max_score", "status", "reason"]
# A folder name that is not UTF-8 (Python holds its bytes as surrogates) is written back as
# the same bytes, instead of failing the whole report.
NAMES_AS_ON_DISK = "surrogateescape"


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8", errors=NAMES_AS_ON_DISK)
    os.replace(tmp, path)


def _number(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(x, 2)


class ResultsWriter:
    """Collects results as they come and writes the results folder at the end."""

    def __init__(self, out_dir: Path):
        self.out_dir = out_dir
        self.results: list[NotebookResult] = []
        self.staging = out_dir / ".feedback-staging"
        out_dir.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.staging, ignore_errors=True)
        self.staging.mkdir()

    def add(self, result: NotebookResult, feedback_html: str | None) -> None:
        self.results.append(result)
        target = self.staging / result.student_id / result.assignment / f"{result.notebook}.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(feedback_html or _status_page(result), encoding="utf-8", errors=NAMES_AS_ON_DISK)

    def finish(self) -> None:
        self.results.sort(key=lambda r: (r.student_id, r.assignment, r.notebook))
        _write_atomically(self.out_dir / "results.json",
                          json.dumps([r.to_json() for r in self.results], indent=2) + "\n")
        _write_atomically(self.out_dir / "grades.csv", grades_csv(self.results))
        feedback, old = self.out_dir / "feedback", self.out_dir / ".feedback-old"
        shutil.rmtree(old, ignore_errors=True)
        if feedback.exists():
            feedback.rename(old)
        self.staging.rename(feedback)
        shutil.rmtree(old, ignore_errors=True)


def grades_csv(results: list[NotebookResult]) -> str:
    """One row per student and assignment: the sum over the assignment's notebooks."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(GRADES_COLUMNS)
    for (student_id, assignment), group in groupby(results, key=lambda r: (r.student_id, r.assignment)):
        group = list(group)
        reasons = [r.reason if len(group) == 1 else f"{r.notebook}: {r.reason}" for r in group if r.reason]
        writer.writerow([student_id, assignment,
                         _number(sum(r.score for r in group)), _number(sum(r.max_score for r in group)),
                         worst_status(r.status for r in group), "; ".join(reasons)])
    return buffer.getvalue()


def _status_page(result: NotebookResult) -> str:
    """Feedback for a notebook that nbgrader could not grade: what happened and why."""
    title = html.escape(f"{result.assignment}/{result.notebook}.ipynb: {result.status}")
    return (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{title}</title></head>\n"
            f"<body><h1>{title}</h1>\n<p>Score: {_number(result.score)} / {_number(result.max_score)}</p>\n"
            f"<p>{html.escape(result.reason or 'No further details.')}</p></body></html>\n")
