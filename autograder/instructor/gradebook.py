"""Write the autograder's scores into an instructor's own nbgrader gradebook.

The grader works in a throwaway nbgrader course; instructors who run nbgrader keep a
persistent one (``gradebook.db``, or any SQLAlchemy URL), read by ``nbgrader export`` and
formgrader. This module puts a results folder into it with nbgrader's own tools: nbgrader's
``generate_assignment`` records the assignment, its notebooks and cells (as when the
instructor releases it), then each graded notebook becomes a submission whose test cells
carry the autograder's points as their ``auto_score``. Cells that need a person (the written
answers) keep no score, so formgrader lists them for manual grading as usual; an answer left
as released keeps nbgrader's 0. The autograded notebooks (RESULTS/autograded/) are copied into
the course's ``autograded/`` folder, where formgrader's manual grading view reads them. Grading
again keeps the hand-given scores (nbgrader's ``manual_score``) and flags them for review.

Missing and invalid notebooks get no submission: nbgrader shows them as not submitted.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path

from nbgrader.api import Gradebook, InvalidEntry, MissingEntry
from sqlalchemy.exc import SQLAlchemyError
from traitlets.config import Config

from autograder.errors import CourseError
from autograder.grading.course import IGNORED, NbGraderConverters
from autograder.instructor.lms import Student
from autograder.layout import find_assignments

NOT_SUBMITTED = ("missing", "invalid")


def gradebook_url(target: str) -> str:
    """A SQLAlchemy URL as given, or a path to a gradebook.db file."""
    return target if "://" in target else f"sqlite:///{Path(target).resolve()}"


def record_assignments(db_url: str, source_dir: Path, assignments: list[str], course_id: str = "") -> None:
    """Let nbgrader record the assignments in the gradebook (``generate_assignment`` in a
    throwaway course folder that uses the instructor's database)."""
    # nbgrader runs alembic by name to create a database: find it without an activated venv.
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
    with tempfile.TemporaryDirectory(prefix="autograder-gradebook-") as tmp:
        c = Config()
        c.CourseDirectory.root = tmp
        c.CourseDirectory.db_url = db_url
        c.CourseDirectory.course_id = course_id
        c.CourseDirectory.ignore = IGNORED
        api = NbGraderConverters(config=c)
        api.log.setLevel(logging.ERROR)
        for assignment in assignments:
            shutil.copytree(source_dir / assignment, Path(tmp, "source", assignment),
                            ignore=shutil.ignore_patterns(*IGNORED))
            result = api.generate_assignment(assignment, force=True, create=True)
            if not result["success"]:  # one line, the cause: nbgrader's log holds its tracebacks
                from autograder.engine.runner import _nbgrader_error

                raise CourseError(f"nbgrader could not record {assignment} in the gradebook {db_url}: "
                                  f"{_nbgrader_error(result.get('log') or result.get('error') or '')}; nothing was recorded")


def _names(student: Student | None) -> dict:
    if student is None or not student.name:
        return {}
    if "," in student.name:
        last, first = (p.strip() for p in student.name.split(",", 1))
    else:
        first, _, last = student.name.strip().rpartition(" ")
    return {"first_name": first or None, "last_name": last or None, "email": student.email or None}


def course_folder(target: str, course_dir: Path | None) -> Path | None:
    """The instructor's nbgrader course folder: ``--course-dir``, else the gradebook file's folder
    (nbgrader keeps gradebook.db at the course's root); None for a database URL without it."""
    return course_dir or (None if "://" in target else Path(target).resolve().parent)


def write_gradebook(results_dir: Path, db_url: str, source_dir: Path, course_id: str = "",
                    roster: list[Student] | None = None, course_dir: Path | None = None) -> int:
    """Put ``results_dir/results.json`` into the gradebook at ``db_url`` and, with ``course_dir``,
    the autograded notebooks into its ``autograded/`` folder; returns the number of notebooks
    recorded. Running it again with new results replaces the automatic scores."""
    try:
        results = json.loads((results_dir / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise CourseError(f"cannot read {results_dir / 'results.json'}: {err}") from err
    assignments = sorted({r["assignment"] for r in results})
    unknown = sorted(set(assignments) - set(find_assignments(source_dir)))
    if unknown:
        raise CourseError(f"no source notebooks for {', '.join(unknown)} in {source_dir}")
    if course_dir is not None:  # before the gradebook: a course folder that cannot take the notebooks stops it first
        _writable(course_dir)
    with _gradebook_errors(db_url):
        record_assignments(db_url, source_dir, assignments, course_id)
        recorded = _record(results, db_url, course_id, roster)
    if course_dir is not None:
        copy_source(source_dir, course_dir, assignments)
        copy_autograded(results_dir, course_dir, [r for r in results if r["status"] not in NOT_SUBMITTED])
    return recorded


def copy_source(source_dir: Path, course_dir: Path, assignments: list[str]) -> None:
    """The source notebooks to ``course_dir/source/<assignment>/``, where formgrader lists the
    course's assignments from (nbgrader's layout); an assignment the course has already is left as it is."""
    for assignment in assignments:
        target = course_dir / "source" / assignment
        if not target.exists():
            shutil.copytree(source_dir / assignment, target, ignore=shutil.ignore_patterns(*IGNORED))


def copy_autograded(results_dir: Path, course_dir: Path, results: list[dict]) -> None:
    """Each graded notebook to ``course_dir/autograded/<student>/<assignment>/``, where formgrader
    reads it (nbgrader's layout): the answers to grade by hand, with the tests' outputs."""
    for r in results:
        place_autograded(r, results_dir / "autograded" / r["student_id"] / r["assignment"] / f"{r['notebook']}.ipynb",
                         course_dir)


def place_autograded(result: dict, autograded: Path, course_dir: Path) -> None:
    """One graded notebook (the file ``autograded``) where formgrader reads it in ``course_dir``."""
    if autograded.is_file():  # a notebook nbgrader could not run has none
        target = course_dir / "autograded" / result["student_id"] / result["assignment"] / f"{result['notebook']}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(autograded, target)


class GradebookRecorder:
    """An instructor's nbgrader gradebook written one graded notebook at a time, as results come in
    (the submission service's ``--gradebook``): the notebook's automatic scores, and with
    ``course_dir`` the source notebooks and the graded one where formgrader reads them, so that
    the written answers can be graded by hand while the service runs. A student's notebook graded
    again replaces the automatic scores of the one before (the hand-given ones stay).

    The assignments are recorded when the recorder is made, before the service grades anything:
    nbgrader's ``generate_assignment`` changes the process's working folder while it runs, which
    no thread of a running service may see; ``record`` only writes rows and copies files."""

    def __init__(self, db_url: str, source_dir: Path, assignments: list[str], course_id: str = "",
                 course_dir: Path | None = None):
        self.db_url, self.course_id, self.course_dir = db_url, course_id, course_dir
        with _gradebook_errors(db_url):
            record_assignments(db_url, source_dir, assignments, course_id)
        if course_dir is not None:
            copy_source(source_dir, course_dir, assignments)
        self._lock = threading.Lock()  # one writer at a time: the service grades in several threads

    def record(self, result: dict, autograded: Path, student: Student | None = None) -> None:
        """``result`` (a NotebookResult as JSON) and its graded notebook; ``student``: the name and
        email formgrader shows. A gradebook that cannot be written raises CourseError."""
        with self._lock:
            with _gradebook_errors(self.db_url):
                _record([result], self.db_url, self.course_id, [student] if student else None)
            if self.course_dir is not None and result["status"] not in NOT_SUBMITTED:
                place_autograded(result, autograded, self.course_dir)


@contextlib.contextmanager
def _gradebook_errors(db_url: str):
    """A database error (a wrong URL, a read-only file, another nbgrader version's schema) as one
    line, the cause: nbgrader's Gradebook logs each one's traceback before re-raising it."""
    database = Path(db_url.removeprefix("sqlite:///")) if db_url.startswith("sqlite:///") else None
    if database is not None and database.is_dir():
        raise CourseError(f"the gradebook {database} is a folder: give the path of a gradebook.db file "
                          "(created if it does not exist); nothing was recorded")
    logging.getLogger("tornado.application").setLevel(logging.CRITICAL)
    try:
        yield
    # nbgrader's Gradebook raises its InvalidEntry for a database error on writing (a read-only file)
    except (SQLAlchemyError, InvalidEntry) as err:
        raise CourseError(f"cannot write the nbgrader gradebook {db_url}: {str(err).splitlines()[0]}; "
                          "nothing was recorded") from err


def _writable(course_dir: Path) -> None:
    """A course folder formgrader's notebooks can be copied into, or CourseError (one line)."""
    try:
        course_dir.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=course_dir).close()
    except OSError as err:
        raise CourseError(f"cannot write into the course folder {course_dir} ({err.strerror or err}): "
                          "nothing was recorded") from err


def _record(results: list[dict], db_url: str, course_id: str, roster: list[Student] | None) -> int:
    """The results into the gradebook, whose assignments were recorded (``record_assignments``)."""
    people = {s.student_id: s for s in roster or []}
    recorded = 0
    with Gradebook(db_url, course_id) as gb:
        for student_id in sorted({r["student_id"] for r in results} | set(people)):
            gb.update_or_create_student(student_id, **_names(people.get(student_id)))
        for result in results:
            if result["status"] in NOT_SUBMITTED:
                continue
            gb.update_or_create_submission(result["assignment"], result["student_id"])
            points = {t["grade_id"]: t["points"] for t in result["tests"]}
            notebook = gb.find_notebook(result["notebook"], result["assignment"])
            for cell in notebook.grade_cells:
                try:
                    grade = gb.find_grade(cell.name, result["notebook"], result["assignment"], result["student_id"])
                except MissingEntry:
                    continue
                if cell.name in points:  # None: a written answer, for a person
                    grade.auto_score = points[cell.name]
                elif cell.cell_type == "code":  # a test cell that never ran (the kernel died first)
                    grade.auto_score = 0.0
                # nbgrader's own rule (SaveAutoGrades): a person looks at what has no automatic
                # score (free-response answers) or was graded by hand before.
                grade.needs_manual_grade = grade.manual_score is not None or grade.auto_score is None
            recorded += 1
        gb.db.commit()
    return recorded
