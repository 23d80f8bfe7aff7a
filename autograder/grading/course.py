"""A throwaway nbgrader course directory, where nbgrader's own apps do the work.

nbgrader expects a course laid out as ``source/``, ``release/``, ``submitted/``,
``autograded/`` and ``feedback/`` next to a gradebook database. The autograder
builds one in a temporary directory for every run, so it never writes into the
repository or into the instructor's submissions.
"""
from __future__ import annotations

import functools
import hashlib
import logging
import re
import shutil
import sqlite3
import threading
from pathlib import Path
from typing import Sequence

import nbformat
import nbgrader
from alembic.script import ScriptDirectory
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.apps import NbGraderAPI
from nbgrader.api import Base, Gradebook
from nbgrader.converters import Autograde
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, Execute, OverwriteCells,
                                    OverwriteKernelspec, SaveAutoGrades)
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine
from traitlets.config import Config

from autograder.cells import grade_id_of, is_written_answer, nbgrader_metadata
from autograder.errors import CourseError
from autograder.grading.exporters import AutogradeExporter
from autograder.grading.feedback import TEMPLATE_DIRS as FEEDBACK_TEMPLATE_DIRS
from autograder.grading.feedback import TEMPLATE_NAME as FEEDBACK_TEMPLATE_NAME
from autograder.grading.feedback import FeedbackExporter, GetGradesAndPending, HideHiddenTests
from autograder.grading.rebuild import OverwriteCellsOnce, OverwriteKernelspecOnce, RebuildFromSource
from autograder.grading.steps import JUDGE_TESTS, SANDBOXED_EXECUTE, SANDBOXED_KERNEL_MANAGER, SAVE_VERDICTS
from autograder.layout import SOLUTIONS_DIR, find_assignments
from autograder.options import GradingOptions
from autograder.sandbox.bwrap import bwrap_available

COURSE_ID = "attention-from-scratch"

# Files of a source folder that never belong to an assignment.
IGNORED = [".ipynb_checkpoints", "__pycache__", "*.pyc", ".DS_Store"]
# What grading leaves in a course folder (workers' copies, kernels' folders): never part of a copy of it.
NOT_COPIED = shutil.ignore_patterns("course-*", "kernel-*")


class NbGraderConverters(NbGraderAPI):
    """nbgrader's API with its converters run one at a time in this process.

    A converter (generate_assignment, autograde, generate_feedback) moves the whole process into
    its course folder while it runs and back to the folder it left when it ends
    (``BaseConverter.start``). Two at once, in two threads, would each go back to where the other
    had moved: the process could be left in a course folder deleted since, where every program it
    starts fails (``os.getcwd()`` raises).
    """

    _one_at_a_time = threading.Lock()

    def generate_assignment(self, *args, **kwargs):
        with self._one_at_a_time:
            return super().generate_assignment(*args, **kwargs)

    def autograde(self, *args, localise: Sequence[str] = (), **kwargs):
        """nbgrader's autograde; ``localise``: graded names whose ladders the kernel runs
        (SandboxedExecute.localise), for this run only."""
        with self._one_at_a_time:
            self.config.SandboxedExecute.localise = ",".join(localise)
            try:
                return super().autograde(*args, **kwargs)
            finally:
                self.config.SandboxedExecute.localise = ""

    def generate_feedback(self, *args, **kwargs):
        with self._one_at_a_time:
            return super().generate_feedback(*args, **kwargs)


SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def nbgrader_id(student_id: str) -> str:
    """The id nbgrader knows a student by: the folder's name when it is plain, else one made
    from it ('_' and a hash: never a plain name). nbgrader globs its paths, so '[ab]' or '*'
    would match other folders; spaces and other characters are as unsafe in its paths."""
    if SAFE_ID.fullmatch(student_id):
        return student_id
    return "_" + hashlib.sha256(student_id.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def without(pipeline, *steps) -> list:
    """The default of an nbgrader pipeline (a List trait) without ``steps``."""
    return [step for step in pipeline.default() if step not in steps]


def grading_config(root: Path, cell_timeout: int = 60, notebook_timeout: int = 300,
                   memory_limit: int = 4 * 1024**3, sandbox: bool = True, warm_kernels: bool = True) -> Config:
    """nbgrader's pipelines as this course grades: each submission rebuilt on the source notebook,
    run in a sandboxed kernel, judged outside it, its feedback without the hidden tests. ``root``:
    the nbgrader course folder (with source/ and release/). Course uses it, and so does the
    nbgrader_config.py shipped for an instructor's own nbgrader (nbgrader/nbgrader_config.py)."""
    c = Config()
    # A cell that runs too long is interrupted and marked as an error,
    # and the rest of the notebook still runs.
    # Each submission is first rebuilt on the source notebook (tampered test
    # cells and metadata have no effect), then run in a sandboxed kernel.
    # The rebuilt notebook's nbgrader metadata is the source's, which generate_assignment
    # validated: nbgrader's CheckCellMetadata (run before and after execution, a tenth of
    # the grader's time per notebook) would only validate it again. A throwaway course
    # has no due dates, so no late penalties either. nbgrader's checks of each cell against the
    # gradebook run against the source notebook's rows read once per process (rebuild.SourceRows).
    sanitize = without(Autograde.sanitize_preprocessors, CheckCellMetadata)
    sanitize[sanitize.index(OverwriteKernelspec)] = OverwriteKernelspecOnce
    sanitize[sanitize.index(OverwriteCells)] = OverwriteCellsOnce
    c.Autograde.sanitize_preprocessors = [RebuildFromSource, *sanitize]
    for step in (RebuildFromSource, OverwriteKernelspecOnce, OverwriteCellsOnce):
        c[step.__name__].course_root = str(root)
    # After execution, the grader's own verdict replaces each test cell's outputs, and the
    # gradebook takes each test's score from that verdict, never from the outputs.
    autograde = without(Autograde.autograde_preprocessors, CheckCellMetadata, AssignLatePenalties)
    autograde[autograde.index(SaveAutoGrades)] = SAVE_VERDICTS
    at = autograde.index(Execute)
    c.Autograde.autograde_preprocessors = [*autograde[:at], SANDBOXED_EXECUTE, JUDGE_TESTS, *autograde[at + 1:]]
    c.Autograde.exporter_class = AutogradeExporter
    c.SandboxedExecute.notebook_timeout = notebook_timeout
    if sandbox:
        c.Execute.kernel_manager_class = SANDBOXED_KERNEL_MANAGER
        c.SandboxedKernelManager.memory_limit = memory_limit
        c.SandboxedKernelManager.work_root = str(root)
        c.SandboxedKernelManager.warm = warm_kernels
    c.Execute.timeout = cell_timeout
    c.Execute.interrupt_on_timeout = True
    # No start and end times in the graded notebooks (RESULTS/autograded/): two gradings
    # of the same notebook, here or on a cluster's worker, give the same file.
    c.Execute.record_timing = False
    # The kernel is killed when the notebook is done: it has nothing to save, and its
    # sandbox is emptied next anyway (a polite shutdown costs a tenth of a second).
    c.Execute.shutdown_kernel = "immediate"
    # nbgrader's default, plus a quiet kernel (its log would land on our stderr).
    c.Execute.extra_arguments = ["--HistoryManager.hist_file=:memory:", "--IPKernelApp.log_level=ERROR"]
    # Students see their failures and partial credit, never the hidden tests' source.
    c.GenerateFeedback.preprocessors = [GetGradesAndPending, HideHiddenTests, CSSHTMLHeaderPreprocessor]
    c.GenerateFeedback.exporter_class = FeedbackExporter
    c.FeedbackExporter.template_name = FEEDBACK_TEMPLATE_NAME
    c.FeedbackExporter.extra_template_basedirs = FEEDBACK_TEMPLATE_DIRS
    return c


@functools.cache
def gradebook_revision() -> str:
    """The revision of nbgrader's gradebook schema (the head of its alembic migrations)."""
    return ScriptDirectory(str(Path(nbgrader.__file__).parent / "alembic")).get_current_head()


# A course's gradebook is the grader's scratch: results leave through results.json, written
# whole at the end, and a run that stops is graded again. So its commits need not wait for the
# disk: nbgrader commits once per cell, about 2 ms each on a disk with SQLite's default
# (synchronous=FULL). A process that is killed still loses nothing it committed; only a crash
# of the whole machine could, and then the run is lost anyway.
_SCRATCH_GRADEBOOKS: set[str] = set()


@event.listens_for(Engine, "connect")
def _scratch_gradebooks_skip_the_disk_wait(dbapi_connection, _record) -> None:
    if isinstance(dbapi_connection, sqlite3.Connection):
        (_, _, path) = dbapi_connection.execute("PRAGMA database_list").fetchone()
        if path in _SCRATCH_GRADEBOOKS:
            dbapi_connection.execute("PRAGMA synchronous=OFF")


# nbgrader opens a gradebook several times per notebook (autograde, the verdicts, the feedback,
# the grader reading the result), and each `Gradebook` makes a new SQLAlchemy engine. SQLAlchemy
# keeps compiled statements per engine (their key holds its dialect), so every notebook compiled
# nbgrader's queries anew: about a tenth of a grading worker's time. One engine per database URL
# in a process keeps them; `Gradebook.close` still disposes of the connections it used, and the
# engine opens new ones when it is next used. (nbgrader looks the function up at each call.)
nbgrader.api.create_engine = functools.lru_cache(maxsize=16)(create_engine)


def new_gradebook(path: Path) -> None:
    """An empty gradebook at ``path``, as nbgrader's Gradebook makes one: its tables, and the
    schema's revision in alembic's table. nbgrader asks a new ``alembic`` process for that
    revision every time it makes a gradebook (seconds: it imports alembic and every migration);
    here it is read once per process."""
    engine = create_engine(f"sqlite:///{path}")
    try:
        Base.metadata.create_all(bind=engine)
        with engine.begin() as connection:
            connection.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)"))
            connection.execute(text("INSERT INTO alembic_version (version_num) VALUES (:revision)"),
                               {"revision": gradebook_revision()})
    finally:
        engine.dispose()


class Course:
    """An nbgrader course rooted at ``root``, with the assignments of ``options.source_dir``."""

    def __init__(self, root: Path, options: GradingOptions | None = None, copy_of: Path | None = None,
                 assignments: list[str] | None = None):
        """``options``: default, the course's solutions/ graded with the default limits.
        ``copy_of``: the root of a generated course with the same source to start from
        (a grading worker copies the CLI's course instead of generating its own).
        ``assignments``: only these of the source (the ones a class submitted), default all."""
        options = options or GradingOptions(SOLUTIONS_DIR)
        if options.sandbox and not bwrap_available():
            raise CourseError("grading runs student code in a bubblewrap sandbox, but `bwrap` (or `prlimit`) "
                              "is not installed: `apt-get install bubblewrap` (make setup does it), or pass "
                              "--no-sandbox to grade without isolation")
        self.root = Path(root)
        self.source_dir = Path(options.source_dir)
        self.localise = options.localise
        if copy_of:
            shutil.copytree(copy_of, self.root, ignore=NOT_COPIED)
        known = find_assignments(self.source_dir)
        unknown = sorted(set(assignments or []) - set(known))
        if unknown:
            raise CourseError(f"no source notebooks for {', '.join(unknown)} in {self.source_dir}")
        if copy_of:  # the assignments the copied course has
            known = find_assignments(self.root / "source")
        self.assignments = known if assignments is None else sorted(assignments)
        for assignment in [] if copy_of else self.assignments:
            shutil.copytree(self.source_dir / assignment, self.root / "source" / assignment,
                            ignore=shutil.ignore_patterns(*IGNORED))
        self.db_url = f"sqlite:///{self.root / 'gradebook.db'}"
        _SCRATCH_GRADEBOOKS.add(str((self.root / "gradebook.db").resolve()))
        if not (self.root / "gradebook.db").exists():
            self.root.mkdir(parents=True, exist_ok=True)
            new_gradebook(self.root / "gradebook.db")
        self.api = NbGraderConverters(config=self._config(options))
        self.api.log.setLevel(logging.ERROR)

    def _config(self, options: GradingOptions) -> Config:
        c = grading_config(self.root, options.cell_timeout, options.notebook_timeout, options.memory_limit,
                           options.sandbox, options.warm_kernels)
        c.CourseDirectory.root = str(self.root)
        c.CourseDirectory.course_id = COURSE_ID
        c.CourseDirectory.db_url = self.db_url
        c.CourseDirectory.ignore = IGNORED
        return c

    def notebooks(self, assignment: str) -> list[str]:
        """The notebook names (without .ipynb) of an assignment."""
        return sorted(p.stem for p in (self.root / "source" / assignment).glob("*.ipynb"))

    def generate(self, assignment: str) -> Path:
        """Run nbgrader generate_assignment: fills the gradebook and writes release/<assignment>."""
        result = self.api.generate_assignment(assignment, force=True, create=True)
        if not result["success"]:
            raise CourseError(f"nbgrader generate_assignment failed for {assignment}:\n"
                              f"{result.get('error') or result.get('log')}")
        return self.root / "release" / assignment

    def generate_all(self, progress=lambda assignment: None) -> None:
        """Generate the course's assignments; ``progress(assignment)`` is told before each."""
        for assignment in self.assignments:
            progress(assignment)
            self.generate(assignment)

    @functools.cache
    def release_cells(self, assignment: str, notebook: str) -> dict:
        """grade_id -> cell of a release notebook (after ``generate``; read once)."""
        release = nbformat.read(self.root / "release" / assignment / f"{notebook}.ipynb", as_version=4)
        return {grade_id_of(c): c for c in release.cells if grade_id_of(c)}

    @functools.cache
    def max_score(self, assignment: str, notebook: str) -> float:
        """The autograded points of a notebook (its written answers are graded by hand): read from
        the gradebook once, where ``generate`` put the source notebook's points."""
        with Gradebook(self.db_url, COURSE_ID) as gb:
            return gb.find_notebook(notebook, assignment).max_score - self.written_points(assignment, notebook)

    def written_points(self, assignment: str, notebook: str) -> float:
        """The points of a notebook's written answers (nbgrader's manually graded answers)."""
        return float(sum(nbgrader_metadata(c)["points"] for c in self.release_cells(assignment, notebook).values()
                         if is_written_answer(c)))

    def clear(self, student_id: str, assignment: str) -> None:
        """Delete one student's assignment from the course folders once its results are read,
        so that disk use does not grow with the class (the gradebook keeps the grades)."""
        for step in ("submitted", "autograded", "feedback"):
            shutil.rmtree(self.path(step, student_id, assignment), ignore_errors=True)

    def path(self, step: str, student_id: str, assignment: str) -> Path:
        """Where nbgrader keeps one student's assignment at a step (submitted, autograded, feedback)."""
        return self.root / step / student_id / assignment
