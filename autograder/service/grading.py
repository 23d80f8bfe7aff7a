"""The service's graders: long-lived workers that take submissions off the database queue.

The course is prepared once, when the service starts (``prepare_course``). Grading happens
in an engine that lives as long as the service, so no submission waits for a course to be
generated or a kernel's Python to start:

- ``LocalEngine``: worker processes on this machine, each with its own copy of the course
  and its warm sandboxed kernels (as ``grade`` without ``--scheduler``);
- ``DaskEngine``: the workers of a Dask cluster, each of which makes its course once from
  the service's (``cluster.CourseOnWorker``, as ``grade --scheduler``).

Both grade one student's notebook with ``runner.grade_group``, so a submission gets what the
command line gives it: the sandbox, the time and memory limits, a status and a reason; but a
failure of the grader itself raises (``raise_failures``), and the submission is handed back.
The notebook is read from the data folder by the service, never by a worker: a folder that
cannot be read is the service's failure (the submission queued again after a pause), and
reaches the engine as bytes. ``Grader`` runs one thread per engine slot: claim the next
submission, grade it, store its result and feedback page.
"""
from __future__ import annotations

import os
import shutil
import sys
import threading
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError

from autograder.engine.process import prepare_worker, worker_context
from autograder.engine.runner import Graded, GraderFailed, grade_group
from autograder.errors import CourseError
from autograder.grading.course import Course
from autograder.grading.steps import WORKER_MODULES
from autograder.instructor.gradebook import GradebookRecorder
from autograder.instructor.lms import Student
from autograder.options import GradingOptions
from autograder.results import NotebookResult
from autograder.submissions import Submission as GraderSubmission

from . import db as tables
from .db import Database, one_line
from .health import Health
from .scores import counted
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


def _grade_in_worker(submission: GraderSubmission, data: bytes) -> Graded:
    """Grade a notebook that came as bytes: written into this worker's own file, beside its course
    (as a Dask worker writes it into its own folder), and read from there."""
    incoming = _worker_course.root.parent / f"incoming-{os.getpid()}.ipynb"
    incoming.write_bytes(data)
    try:
        return grade_group(_worker_course, [replace(submission, path=incoming)], raise_failures=True)
    finally:
        incoming.unlink(missing_ok=True)


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

    def connect(self) -> None:
        """Nothing to connect to: a broken pool is replaced in ``grade``."""

    def problem(self) -> None:
        """Nothing to lose: the workers are this service's own processes."""

    def grade(self, submission: GraderSubmission, notebook: bytes) -> Graded:
        pool = self.pool
        try:
            return pool.submit(_grade_in_worker, submission, notebook).result()
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
    grades one notebook at a time, which travels as bytes (workers share no folder with us).

    A scheduler that goes away (restarted, its machine rebooted) takes the client and the plugin
    with it: the grading that saw it fail is handed back (the Grader queues it again), and
    ``connect``, which the Grader calls before it takes the next submission, connects afresh (to
    the same address, or the scheduler file's new one) and registers the plugin again; while no
    scheduler answers, it raises ConnectionError, and the Grader waits and says so on /health."""

    def __init__(self, course: Course, options: GradingOptions, address: str | None, scheduler_file: Path | None,
                 timeout: float):
        from autograder.engine import cluster

        self.cluster, self.where, self.timeout = cluster, (address, scheduler_file), timeout
        self.plugin = cluster.CourseOnWorker(cluster.course_files(course, course.assignments), options,
                                             name=f"autograder-service-{uuid.uuid4().hex[:12]}")
        self.lock = threading.Lock()
        self.client, self.lost = None, False  # lost: a grading failed with the cluster; not connected again yet
        self.connect()  # a scheduler that cannot be reached at the start: the service does not start
        self.slots = max(1, sum(self.client.nthreads().values()))

    def connect(self) -> None:
        with self.lock:  # one thread connects; the others find the client it made
            if self.client is not None:
                return
            client = self.cluster.connect(*self.where, self.timeout)  # ConnectionError when it cannot
            try:
                client.register_plugin(self.plugin, name=self.plugin.name)
            except Exception as err:  # noqa: BLE001 - a scheduler lost again at once
                _close_quietly(client)
                raise ConnectionError(f"the Dask scheduler took no course plugin: {err}") from err
            self.client, self.lost = client, False

    def problem(self) -> str | None:
        """The scheduler lost: its client reconnecting, or a new one being made (both wait)."""
        client = self.client
        if self.lost or (client is not None and client.status != "running"):
            return (f"the Dask cluster at {self.where[0] or self.where[1]} failed a grading or lost its scheduler: "
                    "connecting to the scheduler again")
        return None

    def grade(self, submission: GraderSubmission, notebook: bytes) -> Graded:
        self.connect()
        client = self.client
        try:
            future = client.submit(self.cluster.grade_remotely, self.plugin.name, [(submission, notebook)],
                                   raise_failures=True, pure=False)
            return future.result()
        except Exception:
            # A notebook's own failures come back as its result: this is the cluster's (the scheduler
            # lost, or restarted without our plugin). The next ``connect`` starts afresh.
            with self.lock:
                if self.client is client:
                    self.client, self.lost = None, True
                    _close_quietly(client)
            raise

    def close(self) -> None:
        if self.client is not None:
            _close_quietly(self.client)


def _close_quietly(client) -> None:
    try:
        client.close(timeout=5)
    except Exception:  # noqa: BLE001 - a client whose scheduler is gone may fail to close; it is dropped
        pass


# --------------------------------------------------------------------------
# the queue's consumers

class Grader:
    """``engine.slots`` threads, each grading one submission at a time off the database queue.

    What the grader itself fails at is never a student's: a database or disk error (the database
    locked by another writer, the disk full) is retried with a growing pause, the claimed
    submission kept as it is (its result, once made, is kept in memory until it is stored); an
    engine's failure, or a graded notebook that came back without its feedback page, hands the
    submission back (``Database.give_back``), and a stored notebook that cannot be read puts it
    back untried (``Database.put_back_unread``), each queued again after a pause. Students whose
    last notebook timed out share ``lane`` workers, one fewer than there are (``claim_next``).
    ``problems`` says what is wrong now, for ``/health`` (``health.Health``, which also counts
    what waits): a grading thread dead or retrying, the engine unreachable, the database's lease
    lost, or submissions waiting while nothing has moved for ``stall_seconds``."""

    def __init__(self, database: Database, storage: Storage, course: Course, engine,
                 gradebook: GradebookRecorder | None = None, stall_seconds: float = 900):
        self.database, self.storage, self.course, self.engine = database, storage, course, engine
        self.gradebook = gradebook  # an instructor's nbgrader gradebook that each graded notebook goes into
        self.stall_seconds = stall_seconds
        self.claims = threading.Lock()
        self.wakeup = threading.Condition()
        self.stopping = False
        self.moved = time.monotonic()  # the last claim or stored result
        self.trouble: dict[str, str] = {}  # thread name -> what it is retrying, or why it died
        self.lane = max(1, engine.slots - 1)  # workers that students whose last notebook timed out may hold
        self.threads = [threading.Thread(target=self._run, name=f"grader-{n}", daemon=True)
                        for n in range(engine.slots)]
        self.health = Health(self, database, storage)

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
        self.database.release_lease()

    def problems(self, waiting: int) -> list[str]:
        """What keeps submissions from being graded now (``waiting``: how many are not done)."""
        trouble = dict(self.trouble)  # a copy: the threads change it meanwhile
        dead = {thread.name for thread in self.threads if not thread.is_alive() and not self.stopping}
        found = [f"{name} died: {trouble.get(name, 'no reason given')}" for name in sorted(dead)]
        found += [f"{name}: {what}" for name, what in sorted(trouble.items()) if name not in dead]
        lost = self.engine.problem()
        found += [lost] if lost else []
        lease = self.database.lease.problem() if self.database.lease else None
        found += [lease] if lease else []
        idle = time.monotonic() - self.moved
        if waiting and idle > self.stall_seconds:
            found.append(f"{waiting} submissions wait and the queue has not moved for {idle:.0f} s")
        return found

    def _run(self) -> None:
        try:
            self._work()
        except BaseException as err:  # noqa: BLE001 - said on /health and in the log, then the thread ends
            if not self.stopping:
                self.trouble[threading.current_thread().name] = f"{type(err).__name__}: {err}"
                print(f"autograder serve: {threading.current_thread().name} stopped: {type(err).__name__}: {err}",
                      file=sys.stderr, flush=True)
            raise

    def _work(self) -> None:
        while not self.stopping:
            # a lost scheduler: no submission is taken (and none fails for it) until one answers
            self._retrying("connecting to the grading engine", self.engine.connect)
            sub = None
            if self.database.lease is None or self.database.lease.held():  # else another service may grade
                with self.claims:
                    sub = self._retrying("claiming the next submission", self.database.claim_next, self.lane)
            if sub is None:
                with self.wakeup:
                    self.wakeup.wait(timeout=2)
                continue
            self.moved = time.monotonic()
            notebook = self._read(sub)
            graded = None if notebook is None else self._grade(sub, notebook)
            if graded is None:
                continue  # handed back: queued again or set aside
            self._retrying(f"storing the result of submission {sub.id}", self._store, sub, graded)
            self.moved = time.monotonic()

    def _retrying(self, what: str, action, *args):
        """``action(*args)``, again after a database or disk error, with a pause that doubles up
        to a minute; the thread's trouble is cleared once it succeeds."""
        name, pause = threading.current_thread().name, 1.0
        while True:
            try:
                done = action(*args)
                self.trouble.pop(name, None)
                return done
            except (SQLAlchemyError, OSError) as err:
                if self.stopping:
                    raise SystemExit from err
                why = self.storage.explain(err) if isinstance(err, OSError) else one_line(err)
                self.trouble[name] = f"{what} failed, retrying every {pause:.0f} s: {why}"
                print(f"autograder serve: {name}: {self.trouble[name]}", file=sys.stderr, flush=True)
                time.sleep(pause)
                pause = min(60.0, 2 * pause)

    def _read(self, sub: tables.Submission) -> bytes | None:
        """The notebook as stored; None where the data folder failed to give it (a folder unreadable
        for a moment, a notebook this data folder does not hold): the submission is put back, to be
        tried again after a pause, and the student is charged nothing."""
        try:
            return self.storage.read_notebook(sub.id)
        except OSError as err:
            why = self.storage.explain(err)
            pause = self._retrying(f"putting back submission {sub.id}", self.database.put_back_unread, sub.id, why)
            print(f"autograder serve: the stored notebook of submission {sub.id} could not be read ({why}): "
                  f"queued again, tried after {pause:.0f} s", file=sys.stderr, flush=True)
            return None

    def _grade(self, sub: tables.Submission, notebook: bytes) -> tuple[NotebookResult, str | None] | None:
        """The result and feedback page; None where the engine failed (the submission handed back)."""
        wanted = GraderSubmission(sub.person_id, sub.assignment, sub.notebook, None)
        try:
            ((result, page),) = self.engine.grade(wanted, notebook)
            if result.autograded and page is None:  # nbgrader graded it, but its page was not written
                raise GraderFailed("the grader wrote no feedback page")
        except Exception as err:  # noqa: BLE001 - the grader's failure (a worker killed, the scheduler lost)
            if self.stopping:
                raise SystemExit from err  # shutting down: it stays 'grading', and is queued again at the next start
            why = self.storage.public(f"{type(err).__name__}: {one_line(err)}")
            state = self._retrying(f"handing back submission {sub.id}", self.database.give_back, sub.id, why)
            print(f"autograder serve: grading submission {sub.id} failed in the grader ({why}): "
                  f"{'queued again' if state == tables.QUEUED else state}", file=sys.stderr, flush=True)
            return None
        return result, page

    def _store(self, sub: tables.Submission, graded: tuple[NotebookResult, str | None]) -> None:
        result, page = graded
        self.storage.write_result(sub.id, result, page)
        with self.database.writing.begin() as session:
            row = session.get(tables.Submission, sub.id)
            if row.state != tables.GRADING:  # never twice: only the grading that claimed it stores
                return
            row.state, row.graded = tables.DONE, tables.now()
            score = counted(result)  # what every page shows: written answers that await a person left out
            row.status, row.score, row.max_score = result.status.value, score.points, score.maximum
            row.reason = result.reason
            row.result = result.to_json()
            person = session.get(tables.Person, sub.person_id)
            student = Student(person.id, person.lms_id, person.name, person.email) if person else None
        if self.gradebook is not None:
            try:
                self.gradebook.record(result.to_json(), self.storage.autograded(sub.id), student)
            except CourseError as err:  # the submission is graded all the same: its result is stored
                print(f"autograder serve: submission {sub.id} not recorded in the gradebook: {err}", file=sys.stderr)
