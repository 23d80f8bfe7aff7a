"""The service's graders: long-lived workers that take submissions off the database queue.

The course is prepared once, when the service starts (``prepare_course``). Grading happens
in an engine that lives as long as the service, so no submission waits for a course to be
generated or a kernel's Python to start:

- ``LocalEngine``: worker processes on this machine, each with its own copy of the course
  and its warm sandboxed kernels (as ``grade`` without ``--scheduler``);
- ``DaskEngine``: the workers of a Dask cluster, each of which makes its course once from
  the service's (``cluster.CourseOnWorker``, as ``grade --scheduler``).

Both grade one student's notebook with ``runner.grade_group``, so a submission gets what the
command line gives it: the sandbox, the time and memory limits, a status and a reason.
``Grader`` runs one thread per engine slot: claim the oldest queued submission, grade it,
store its result and feedback page.
"""
from __future__ import annotations

import os
import shutil
import sys
import threading
import uuid
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from pathlib import Path

from autograder.engine.process import prepare_worker, worker_context
from autograder.engine.runner import Graded, grade_group
from autograder.errors import CourseError
from autograder.grading.course import Course
from autograder.grading.steps import WORKER_MODULES
from autograder.instructor.gradebook import GradebookRecorder
from autograder.instructor.lms import Student
from autograder.options import GradingOptions
from autograder.results import NotebookResult, Status
from autograder.submissions import Submission as GraderSubmission

from . import db as tables
from .db import Database
from .storage import Storage


def prepare_course(work_dir: Path, options: GradingOptions) -> Course:
    """The course every grading worker copies: generated once, when the service starts."""
    shutil.rmtree(work_dir, ignore_errors=True)  # what a killed service left
    work_dir.mkdir(parents=True)
    course = Course(work_dir / "course", options)
    course.generate_all()
    return course


# --------------------------------------------------------------------------
# on this machine

_worker_course: Course | None = None


def _start_worker(course_root: Path, options: GradingOptions, service_pid: int) -> None:
    global _worker_course
    prepare_worker(service_pid)
    _worker_course = Course(course_root.parent / f"course-{os.getpid()}", options, copy_of=course_root)
    _warm_up(_worker_course)


def _warm_up(course: Course) -> None:
    """Grade the first assignment's release notebook (its stubs fail at once) and throw the
    result away: the first student's notebook then finds the kernels' fork server started and
    the grader's code loaded, and waits seconds, not a minute."""
    assignment = course.assignments[0]
    for notebook in course.notebooks(assignment)[:1]:
        release = course.root / "release" / assignment / f"{notebook}.ipynb"
        if release.is_file():
            grade_group(course, [GraderSubmission("warm-up", assignment, notebook, release)])


def _grade_in_worker(submission: GraderSubmission) -> Graded:
    return grade_group(_worker_course, [submission])


class LocalEngine:
    """``jobs`` worker processes, started once and kept (a new pool if one of them dies)."""

    def __init__(self, course: Course, options: GradingOptions, jobs: int):
        self.course, self.options, self.slots = course, options, jobs
        self.lock = threading.Lock()
        self.pool = self._new_pool()

    def _new_pool(self) -> ProcessPoolExecutor:
        pool = ProcessPoolExecutor(self.slots, mp_context=worker_context(__name__, *WORKER_MODULES),
                                   initializer=_start_worker, initargs=(self.course.root, self.options, os.getpid()))
        for _ in range(self.slots):  # start (and warm up) every worker now, not at the first submission
            pool.submit(os.getpid)
        return pool

    def grade(self, submission: GraderSubmission, notebook: Path) -> Graded:
        pool = self.pool
        try:
            return pool.submit(_grade_in_worker, replace(submission, path=notebook)).result()
        except BrokenProcessPool:
            with self.lock:  # the first thread to see it starts a new pool
                if self.pool is pool:
                    self.pool = self._new_pool()
            raise

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


# --------------------------------------------------------------------------
# on a Dask cluster

class DaskEngine:
    """The workers of a Dask scheduler; each makes its course once (a worker plugin) and then
    grades one notebook at a time, which travels as bytes (workers share no folder with us)."""

    def __init__(self, course: Course, options: GradingOptions, address: str | None, scheduler_file: Path | None,
                 timeout: float):
        from autograder.engine import cluster

        self.cluster = cluster
        self.client = cluster.connect(address, scheduler_file, timeout)
        self.plugin = cluster.CourseOnWorker(cluster.course_files(course, course.assignments), options,
                                             name=f"autograder-service-{uuid.uuid4().hex[:12]}")
        self.client.register_plugin(self.plugin, name=self.plugin.name)
        self.slots = max(1, sum(self.client.nthreads().values()))

    def grade(self, submission: GraderSubmission, notebook: Path) -> Graded:
        future = self.client.submit(self.cluster.grade_remotely, self.plugin.name,
                                    [(submission, notebook.read_bytes())], pure=False)
        return future.result()

    def close(self) -> None:
        self.client.close()


# --------------------------------------------------------------------------
# the queue's consumers

class Grader:
    """``engine.slots`` threads, each grading one submission at a time off the database queue."""

    def __init__(self, database: Database, storage: Storage, course: Course, engine,
                 gradebook: GradebookRecorder | None = None):
        self.database, self.storage, self.course, self.engine = database, storage, course, engine
        self.gradebook = gradebook  # an instructor's nbgrader gradebook that each graded notebook goes into
        self.claims = threading.Lock()
        self.wakeup = threading.Condition()
        self.stopping = False
        self.threads = [threading.Thread(target=self._work, name=f"grader-{n}", daemon=True)
                        for n in range(engine.slots)]

    def start(self) -> int:
        """Queue again what a killed service was grading, then start; returns how many were requeued."""
        requeued = self.database.requeue_interrupted()
        for thread in self.threads:
            thread.start()
        return requeued

    def notify(self) -> None:
        """A submission was queued."""
        with self.wakeup:
            self.wakeup.notify_all()

    def stop(self) -> None:
        self.stopping = True
        self.notify()
        self.engine.close()

    def _work(self) -> None:
        while not self.stopping:
            with self.claims:
                sub = self.database.claim_next()
            if sub is None:
                with self.wakeup:
                    self.wakeup.wait(timeout=2)
                continue
            self._store(sub, self._grade(sub))

    def _grade(self, sub: tables.Submission) -> tuple[NotebookResult, str | None]:
        wanted = GraderSubmission(sub.person_id, sub.assignment, sub.notebook, None)
        try:
            ((result, page),) = self.engine.grade(wanted, self.storage.notebook(sub.id))
        except Exception as err:  # noqa: BLE001 - a worker that died: this submission's status, not the service's
            if self.stopping:
                raise SystemExit from err  # shutting down: it stays 'grading', and is queued again at the next start
            result = NotebookResult.failed(sub.person_id, sub.assignment, sub.notebook, Status.ERROR,
                                           self.course.max_score(sub.assignment, sub.notebook),
                                           f"grading worker failed: {type(err).__name__}: {err}")
            page = None
        return result, page

    def _store(self, sub: tables.Submission, graded: tuple[NotebookResult, str | None]) -> None:
        result, page = graded
        self.storage.write_result(sub.id, result, page)
        with self.database.session.begin() as session:
            row = session.get(tables.Submission, sub.id)
            if row.state != tables.GRADING:  # never twice: only the grading that claimed it stores
                return
            row.state, row.graded = tables.DONE, tables.now()
            row.status, row.score, row.max_score = result.status.value, result.score, result.max_score
            row.reason = result.reason
            row.result = result.to_json()
            person = session.get(tables.Person, sub.person_id)
            student = Student(person.id, person.lms_id, person.name, person.email) if person else None
        if self.gradebook is not None:
            try:
                self.gradebook.record(result.to_json(), self.storage.autograded(sub.id), student)
            except CourseError as err:  # the submission is graded all the same: its result is stored
                print(f"autograder serve: submission {sub.id} not recorded in the gradebook: {err}", file=sys.stderr)
