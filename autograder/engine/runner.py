"""Grade students' assignments with nbgrader (autograde, then feedback), in parallel workers."""
from __future__ import annotations

import os
import re
import sys
from concurrent.futures import ALL_COMPLETED, FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from itertools import islice
from math import fsum
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import nbformat
from nbgrader.api import Gradebook

from autograder.cells import nbgrader_metadata
from autograder.engine.process import prepare_worker, worker_context
from autograder.grading.course import COURSE_ID, Course, nbgrader_id
from autograder.grading.rebuild import identify
from autograder.grading.steps import WORKER_MODULES
from autograder.options import GradingOptions
from autograder.results import UNLOCALISED, NotebookResult, Status, observed_status, test_results
from autograder.submissions import Submission, drop_broken_grade_ids, load_notebook


class GraderFailed(RuntimeError):
    """Grading failed in the grader itself (nbgrader, the sandbox, the disk), after the notebook
    was read and accepted: what the notebook does in its kernel is a status (an event the
    executor observed), never an nbgrader failure or an exception."""


def grade_assignment(course: Course, submissions: list[Submission], raise_failures: bool = False) -> list[NotebookResult]:
    """Grade the notebooks of one student and one assignment (all of ``submissions``); nbgrader's
    failure is their error, or with ``raise_failures`` raises GraderFailed."""
    student_id, assignment = submissions[0].student_id, submissions[0].assignment
    submitted = course.path("submitted", student_id, assignment)
    submitted.mkdir(parents=True, exist_ok=True)

    results: dict[str, NotebookResult] = {}
    to_grade = []
    for sub in submissions:
        def failed(status: Status, reason: str) -> NotebookResult:
            return NotebookResult.failed(student_id, assignment, sub.notebook, status,
                                         course.max_score(assignment, sub.notebook), reason)
        if sub.refused:
            results[sub.notebook] = failed(Status.INVALID, sub.refused)
            continue
        if sub.path is None:
            results[sub.notebook] = failed(Status.MISSING, sub.note)
            continue
        try:
            notebook = load_notebook(sub.path)
            sub = replace(sub, note="; ".join(filter(None, [sub.note, *drop_broken_grade_ids(notebook)])))
            _check_cell_count(notebook, course.release_cells(assignment, sub.notebook))
            _check_is_this_assignment(notebook, course.release_cells(assignment, sub.notebook))
        except (ValueError, OSError) as err:
            results[sub.notebook] = failed(Status.INVALID, str(err))
            continue
        # Only the notebook is copied: files beside it (say, a module that shadows
        # the check helpers) never reach the grading kernel.
        nbformat.write(notebook, submitted / f"{sub.notebook}.ipynb")
        to_grade.append(sub)

    if to_grade:
        outcome = course.api.autograde(assignment, student_id, force=True, create=True)
        if outcome["success"]:
            graded = {sub.notebook: _read_result(course, sub) for sub in to_grade}
            wanted = sorted({name for result in graded.values() for name in _unlocalised(result)}) \
                if course.localise else []
            if wanted:
                outcome, graded = _localised(course, to_grade, graded, wanted)
        for sub in to_grade:
            if outcome["success"]:
                results[sub.notebook] = graded[sub.notebook]
            else:
                reason = _failure_reason(outcome)
                if raise_failures:
                    raise GraderFailed(f"autograde failed: {reason}")
                results[sub.notebook] = NotebookResult.failed(
                    student_id, assignment, sub.notebook, Status.ERROR, course.max_score(assignment, sub.notebook),
                    f"autograde failed: {reason}")
        if outcome["success"]:
            course.api.generate_feedback(assignment, student_id, force=True)
    return [results[sub.notebook] for sub in submissions]


def _localised(course: Course, to_grade: list[Submission], graded: dict[str, NotebookResult],
               wanted: list[str]) -> tuple[dict, dict[str, NotebookResult]]:
    """The outcome and results of a second run of the student's notebooks (``graded``: the first's),
    whose kernels run the ladders (attention_checks.localise) of ``wanted``, the graded names that
    failed with no ladder to localise their mistake: a grading kernel holds no answer, so it cannot
    tell wrong values itself. A notebook whose names all pass, or whose failures were localised
    already, runs once.

    The second run counts only where every notebook gets the same status and the same points in
    every cell as in the first (a deterministic notebook does: the ladder runs after a check's
    declared cases and puts the random state back). Else (code whose results change from run to
    run, or that behaves otherwise once it sees the grader ask for ladders) the notebooks are
    graded a third time as the first time, and that run counts: asking for a ladder can never
    raise a score."""
    sub = to_grade[0]
    outcome = course.api.autograde(sub.assignment, sub.student_id, force=True, create=True, localise=wanted)
    if outcome["success"]:
        again = {s.notebook: _read_result(course, s) for s in to_grade}
        if all(_scores(again[name]) == _scores(result) for name, result in graded.items()):
            return outcome, again
    else:  # the grader's own failure (the first run succeeded): said, never hidden behind the third run
        print(f"autograder: the second run of {sub.student_id}'s {sub.assignment} (the ladders of "
              f"{', '.join(wanted)}) failed in the grader: {_failure_reason(outcome)}; graded again as the first "
              "time, without findings", file=sys.stderr, flush=True)
    outcome = course.api.autograde(sub.assignment, sub.student_id, force=True, create=True)
    return outcome, {s.notebook: _read_result(course, s) for s in to_grade} if outcome["success"] else {}


def _unlocalised(result: NotebookResult) -> list[str]:
    """The graded names whose failures JudgeTests found not localised in this notebook."""
    if all(test.passed is not False for test in result.tests):
        return []  # (no test failed: the autograded notebook need not be read again)
    names = read_autograded(result.autograded).metadata.get(UNLOCALISED, [])
    return [name for name in names if isinstance(name, str)]


def _scores(result: NotebookResult) -> tuple:
    return result.status, [(test.grade_id, test.points) for test in result.tests]


# Cells a submission may add to the assignment's own: far more than trying things out needs,
# few enough that running them (a kernel round trip each) and their feedback stay cheap.
MAX_ADDED_CELLS = 300


def _check_cell_count(notebook, release_cells: dict) -> None:
    """A notebook with more added cells than that is refused whole (not cut short: which
    cells would run would then depend on where the student put them)."""
    added = len(notebook.cells) - len(release_cells)
    if added > MAX_ADDED_CELLS:
        raise ValueError(f"the notebook has {len(notebook.cells)} cells, {added} more than the assignment's "
                         f"{len(release_cells)}; at most {MAX_ADDED_CELLS} added cells are graded: delete the "
                         "cells you do not need and submit again")


def _check_is_this_assignment(notebook, release_cells: dict) -> None:
    """A notebook with none of the assignment's solution or test cells is another notebook
    (every notebook has a setup cell), not an empty answer."""
    # code cells only: every notebook's written answer is released as the same "YOUR ANSWER HERE"
    own = {grade_id for grade_id, cell in release_cells.items() if cell.cell_type == "code"
           and any(nbgrader_metadata(cell).get(role) for role in ("solution", "grade"))}
    if not any(identify(cell, set(release_cells), release_cells) in own for cell in notebook.cells):
        raise ValueError("none of this assignment's cells are in the notebook: is it the notebook of "
                         "another assignment, or a new notebook?")


def feedback_file(course: Course, student_id: str, assignment: str, notebook: str) -> Path:
    return course.path("feedback", student_id, assignment) / f"{notebook}.html"


Graded = list[tuple[NotebookResult, str | None]]  # each result with its feedback page, if nbgrader made one


def grade_group(course: Course, group: Sequence[Submission], raise_failures: bool = False) -> Graded:
    """One student's assignment; whatever goes wrong becomes that student's status, but with
    ``raise_failures`` (the submission service: it queues the notebook again, and charges the
    student no attempt) a failure of the grader raises GraderFailed.

    nbgrader knows the student by a safe id (its paths are glob patterns: a folder named
    ``[ab]`` would mean ``a`` or ``b``); the results carry the real one."""
    real_id = group[0].student_id
    group = [replace(s, student_id=nbgrader_id(real_id)) for s in group]
    try:
        results = grade_assignment(course, list(group), raise_failures)
    except Exception as err:  # noqa: BLE001 - anything nbgrader raises for this submission
        if raise_failures:
            course.clear(group[0].student_id, group[0].assignment)
            if not isinstance(err, GraderFailed):  # a plain message: it comes back from a worker whole
                err = GraderFailed(f"grading failed: {type(err).__name__}: {err}")
            raise err from None
        results = [NotebookResult.failed(s.student_id, s.assignment, s.notebook, Status.ERROR,
                                         course.max_score(s.assignment, s.notebook),
                                         f"grading failed: {type(err).__name__}: {err}") for s in group]
    graded = []
    for result in results:
        page = feedback_file(course, result.student_id, result.assignment, result.notebook)
        page_html = page.read_text(encoding="utf-8") if page.is_file() else None
        # the assignment's written points, as max_score, whatever happened to the notebook
        written = course.written_points(result.assignment, result.notebook)
        graded.append((replace(result, student_id=real_id, written_points=written), page_html))
    course.clear(group[0].student_id, group[0].assignment)
    return graded


def grade_all(groups: Iterable[Sequence[Submission]], course: Course, jobs: int,
              options: GradingOptions) -> Iterator[Graded]:
    """Grade every group in ``course`` (generated), or ``jobs`` at a time, each worker in a
    copy of it, made with ``options``.

    Results come as they finish; the report sorts them, so the order does not matter.
    At most a few groups per worker are in flight, so memory does not grow with the class.
    """
    if jobs <= 1:
        for group in groups:
            yield grade_group(course, group)
        return
    groups = iter(groups)
    while True:  # a new pool when a worker process dies: only the groups in flight then are lost
        with ProcessPoolExecutor(jobs, mp_context=worker_context(__name__, *WORKER_MODULES),
                                 initializer=_start_worker, initargs=(course.root, options, os.getpid())) as pool:
            in_flight, broken = {}, False
            while not broken or in_flight:
                for group in [] if broken else islice(groups, 2 * jobs - len(in_flight)):
                    in_flight[pool.submit(_grade_in_worker, list(group))] = group
                if not in_flight:
                    return
                done, _ = wait(in_flight, return_when=ALL_COMPLETED if broken else FIRST_COMPLETED)
                for future in done:
                    group = in_flight.pop(future)
                    try:
                        yield future.result()
                    except Exception as err:  # noqa: BLE001 - whatever happened, only to this group
                        broken = broken or isinstance(err, BrokenProcessPool)
                        yield [(NotebookResult.failed(s.student_id, s.assignment, s.notebook, Status.ERROR,
                                                      course.max_score(s.assignment, s.notebook),
                                                      f"grading worker failed: {type(err).__name__}"), None)
                               for s in group]


_worker_course: Course | None = None


def _start_worker(course_root: Path, options: GradingOptions, cli: int) -> None:
    global _worker_course
    prepare_worker(cli)
    _worker_course = Course(course_root.parent / f"course-{os.getpid()}", options, copy_of=course_root)


def _grade_in_worker(group: list[Submission]) -> Graded:
    return grade_group(_worker_course, group)


def _read_result(course: Course, sub: Submission) -> NotebookResult:
    with Gradebook(course.db_url, COURSE_ID) as gb:
        graded = gb.find_submission_notebook(sub.notebook, sub.assignment, sub.student_id)
        # No automatic score: nbgrader leaves the cell to a person (an answered written question).
        scores = {g.name: (None if g.auto_score is None else float(g.auto_score), float(g.max_score))
                  for g in graded.grades}
    path = course.path("autograded", sub.student_id, sub.assignment) / f"{sub.notebook}.ipynb"
    text = path.read_text(encoding="utf-8")  # kept for formgrader (RESULTS/autograded/)
    autograded = read_autograded(text)
    # the status is what the executor observed (a timeout, a dead kernel), never what a cell printed
    status, reason = observed_status(autograded)
    reason = reason or sub.note
    tests = test_results(autograded, scores)
    auto = [t for t in tests if not t.manual]  # written answers count apart: graded by hand
    # fsum: correctly rounded, so the same on every Python (3.12's sum() compensates, 3.11's does
    # not: 12.879999999999999 there, 12.88 here, for the same points)
    return NotebookResult(sub.student_id, sub.assignment, sub.notebook, status, fsum(t.points for t in auto),
                          fsum(t.max_points for t in auto), tests, reason, autograded=text,
                          to_grade_by_hand=fsum(t.max_points for t in tests if t.manual and t.points is None))


def read_autograded(text: str) -> nbformat.NotebookNode:
    """An autograded notebook, as ``nbformat.reads(text, as_version=4)`` gives it, without its
    validation: the course's exporter validated the notebook after its kernel ran and wrote it as
    version 4 (nothing to convert), and ``reads`` would only log what validating found."""
    return nbformat.reader.reads(text)


def _failure_reason(outcome: dict) -> str:
    """Why an nbgrader autograde failed, from its outcome (its log and error)."""
    return _nbgrader_error("\n".join(filter(None, [outcome.get("log"), outcome.get("error")])) or "nbgrader failed")


def _nbgrader_error(text: str) -> str:
    """What went wrong, from nbgrader's log: its last exception line ('TypeError: ...'), not
    its closing words ('Please see the above traceback', which no one sees, also raised as an
    NbGraderException)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"[\w.]*(Error|Exception|Exit|Interrupt)\b", line)
              and "NbGraderException" not in line]
    return (errors or lines or [text])[-1]
