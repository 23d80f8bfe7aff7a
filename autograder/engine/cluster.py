"""Grading on a Dask cluster: ``grade SUBMISSIONS --out RESULTS --scheduler tcp://HOST:8786``.

Each group (one student's assignment) is one Dask task. Everything travels through the
scheduler, so workers may be other machines that share no folder with the CLI:

- the CLI's generated course (source and release notebooks, and the gradebook nbgrader
  filled), as bytes, in a worker plugin (``CourseOnWorker``): each worker process starts its
  own course from them once, as a local worker copies the CLI's, with the CLI's options
  (sandbox, limits, warm kernels), and grades every group it is given in it, one at a time;
  its warm sandbox outlives the run (emptied after each kernel, as between two students), for
  the next run with the same limits (a worker started with ``--preload autograder.engine.cluster``
  starts the one of the default limits before its first run);
- the submitted notebooks, as bytes, in each task (read here, at most a few groups per
  worker thread ahead, so memory does not grow with the class);
- the results (``NotebookResult`` and the feedback page), as each task's value, written
  here by the CLI's ``ResultsWriter`` as in a local run.

Faults are Dask's to handle: a worker that dies has its tasks run again elsewhere (a task
has one key, so it gives one result); a task whose workers died while running it more
than ``distributed.scheduler.allowed-failures`` times (a scheduler setting) ends in
``KilledWorker`` and its notebooks get status ``error`` with a reason; losing the
scheduler raises ``ConnectionError``, which the CLI reports before writing any result.

Only this module imports Dask, and only the CLI's ``--scheduler``/``--scheduler-file``
import this module: local grading needs no Dask.
"""
from __future__ import annotations

import asyncio
import importlib
import logging
import os
import shutil
import tempfile
import threading
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Iterator, Sequence

from autograder.engine.process import kernel_environment, prepare_process
from autograder.engine.runner import Graded, grade_group
from autograder.errors import CourseError
from autograder.grading.course import Course, nbgrader_id
from autograder.grading.steps import WORKER_MODULES
from autograder.options import GradingOptions
from autograder.results import NotebookResult, Status
from autograder.sandbox.bwrap import sandbox_limits
from autograder.sandbox.server import launch_warm_sandbox, stop_fork_servers
from autograder.submissions import MAX_NOTEBOOK_BYTES, Submission, load_notebook

try:
    import distributed
    from distributed import WorkerPlugin
    from distributed.scheduler import KilledWorker
except ImportError as err:  # only grading on a cluster needs it
    raise CourseError("grading on a Dask cluster needs Dask's distributed package on this machine and on "
                      "every worker: pip install 'distributed>=2024.1'") from err

# How often the CLI looks whether workers joined that could take more groups.
POLL_SECONDS = 2


class CourseOnWorker(WorkerPlugin):
    """A worker's own course, made once from the bytes of the CLI's generated course (a worker
    may be another machine). A worker process grades one group at a time (one fork server, one
    nbgrader course): start workers with ``--nthreads 1`` and as many ``--nworkers`` as cores."""

    def __init__(self, files: dict[str, bytes], options: GradingOptions, name: str):
        self.files, self.options, self.name = files, options, name

    async def setup(self, worker) -> None:
        self.failed = None
        self.tmp = Path(tempfile.mkdtemp(prefix="autograder-worker-"))
        try:  # in a thread: the worker's event loop must not wait for files and a gradebook
            await asyncio.get_running_loop().run_in_executor(None, self._build)
        except Exception as err:  # the CLI sees it if this worker was there when the run started
            self.failed = f"this worker could not build the course: {type(err).__name__}: {err}"
            raise

    def _build(self) -> None:
        self.lock = threading.Lock()  # a group at a time (a lock is made where it is used: it does not pickle)
        self.environment = kernel_environment()
        self.environment.__enter__()  # for this worker process's kernels, as long as the plugin lives
        prepare_process()
        # One warm sandbox per worker, for this run's limits: the last run's or the preload's
        # where they are the same (ready now), else a new one, whose Python imports PyTorch
        # while this worker writes its course and takes its first group. One of other limits
        # goes, unless a kernel of another run on this worker is using it.
        stop_fork_servers(keeping=sandbox_limits(self.options.memory_limit))
        launch_warm_sandbox(self.options)
        generated = self.tmp / "generated"
        for relative, data in self.files.items():
            path = generated / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        self.course = Course(self.tmp / "course", replace(self.options, source_dir=generated / "source"),
                             copy_of=generated)

    def teardown(self, worker) -> None:
        if hasattr(self, "environment"):
            self.environment.__exit__(None, None, None)
        if hasattr(self, "lock") and self.lock.locked():  # a group of a run that ended grades still
            stop_fork_servers()  # and its kernel with them
        # Else the sandbox stays warm for the next run, as empty as the end of each kernel leaves
        # it (the fork server's reset, as between two students).
        shutil.rmtree(self.tmp, ignore_errors=True)

    def grade(self, group: list[tuple[Submission, bytes | None]], raise_failures: bool = False) -> Graded:
        """Grade one group whose notebooks came as bytes: each is written into this worker's
        own folder and read from there, as a local worker reads the submissions."""
        if self.failed:  # a worker that joined the run later: its groups say why
            raise CourseError(self.failed)
        with self.lock:
            incoming = Path(tempfile.mkdtemp(prefix="incoming-", dir=self.tmp))
            try:
                subs = []
                for number, (sub, data) in enumerate(group):
                    if data is not None:
                        path = incoming / f"{number}.ipynb"
                        path.write_bytes(data)
                        sub = replace(sub, path=path)
                    subs.append(sub)
                return grade_group(self.course, subs, raise_failures)
            finally:
                shutil.rmtree(incoming, ignore_errors=True)


def dask_setup(worker) -> None:
    """``dask worker ... --preload autograder.engine.cluster``: the worker imports what grading
    needs (this module and nbgrader with it, the grader's steps and PyTorch) as it starts, once,
    instead of in the first run it takes part in (seconds per worker process), and starts the
    warm sandbox a run with the default limits grades in (its Python imports PyTorch too)."""
    for module in WORKER_MODULES:
        importlib.import_module(module)
    launch_warm_sandbox(GradingOptions(source_dir=Path()))  # the source is the CLI's concern, not a sandbox's


def grade_remotely(plugin_name: str, group: list[tuple[Submission, bytes | None]],
                   raise_failures: bool = False) -> Graded:
    """The task: runs on a worker, in the course its plugin built (``raise_failures``: as
    runner.grade_group's)."""
    return distributed.get_worker().plugins[plugin_name].grade(group, raise_failures)


class _WithoutTracebacks(logging.Filter):
    """Dask's own log lines, without the tracebacks of its client's shutdown: when the scheduler
    is gone, the client logs the CancelledError of every connection it closes, while the CLI says
    in one line what happened and what to do."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info = record.exc_text = None
        return bool(record.getMessage().strip())


_WITHOUT_TRACEBACKS = _WithoutTracebacks()  # one instance: a handler adds it once, however many runs


def connect(address: str | None, scheduler_file: Path | None, timeout: float) -> "distributed.Client":
    """A client of the scheduler at ``address`` or the one ``scheduler_file`` names, once it has a
    worker: a scheduler that cannot be reached, or has no workers, is a ConnectionError that says so.
    ``timeout``: seconds to wait for the scheduler, its first worker, and the scheduler again
    once lost (the client's reconnecting)."""
    where = address or f"the scheduler in {scheduler_file}"
    for handler in logging.getLogger("distributed").handlers:  # the handler Dask's logging config gives it
        handler.addFilter(_WITHOUT_TRACEBACKS)
    try:
        if scheduler_file is not None:
            client = distributed.Client(scheduler_file=str(scheduler_file), timeout=timeout)
        else:
            client = distributed.Client(address, timeout=timeout)
    except (OSError, ValueError, asyncio.TimeoutError) as err:
        raise ConnectionError(f"cannot reach the Dask scheduler at {where}: {err}") from err
    try:
        client.wait_for_workers(1, timeout=timeout)  # a cluster that is still starting
    except TimeoutError as err:
        scheduler = client.scheduler.address
        client.close()
        raise ConnectionError(f"the Dask scheduler at {scheduler} has no workers after {timeout:g} s: "
                              f"start some with `dask worker {scheduler} --nthreads 1`") from err
    return client


def course_files(course: Course, assignments: Sequence[str]) -> dict[str, bytes]:
    """The generated course as the workers receive it: the source and release folders of
    ``assignments`` and the gradebook that ``generate_assignment`` filled, so that no worker
    generates the assignments again (seconds each)."""
    folders = [course.root / step / assignment for step in ("source", "release") for assignment in assignments]
    files = [course.root / "gradebook.db"] + [path for folder in folders for path in sorted(folder.rglob("*"))]
    return {str(path.relative_to(course.root)): path.read_bytes() for path in files if path.is_file()}


def engine(address: str | None, scheduler_file: Path | None, timeout: float):
    """``grade(groups, course, options)``, grading on the cluster of the scheduler at ``address``
    or the one ``scheduler_file`` names. It connects now, so that a scheduler that cannot be
    reached, or has no workers, stops the run before RESULTS is touched."""
    client = connect(address, scheduler_file, timeout)

    def grade(groups: Sequence[Sequence[Submission]], course: Course, options: GradingOptions) -> Iterator[Graded]:
        with client:
            yield from grade_on_cluster(groups, course, client, options)
    return grade


def grade_on_cluster(groups: Sequence[Sequence[Submission]], course: Course, client: "distributed.Client",
                     options: GradingOptions) -> Iterator[Graded]:
    """Grade every group on ``client``'s cluster; results come as they finish (as from ``runner.grade_all``).

    ``course`` is the CLI's generated course: it goes to the workers (only
    the assignments in ``groups``), and it gives the max scores of notebooks that could not run."""
    files = course_files(course, sorted({group[0].assignment for group in groups}))
    # One plugin per run: two runs on one cluster never share (or tear down) each other's courses.
    run = uuid.uuid4().hex[:12]
    plugin = CourseOnWorker(files, options, name=f"autograder-course-{run}")
    try:
        client.register_plugin(plugin, name=plugin.name)
    except Exception as err:  # noqa: BLE001 - raised on a worker (no bwrap there, say), re-raised here
        raise CourseError(f"a Dask worker could not build the course: {type(err).__name__}: {err}") from err
    try:
        yield from _stream(client, groups, course, plugin.name, run)
    finally:
        try:
            client.unregister_worker_plugin(plugin.name)
        except Exception:  # noqa: BLE001 - the scheduler is gone: its workers drop the plugin with it
            pass


def _stream(client, groups, course: Course, plugin_name: str, run: str) -> Iterator[Graded]:
    pending = enumerate(groups)
    in_flight: dict = {}  # future -> group
    while True:
        # A few groups per worker thread ahead (their notebooks' bytes wait on the scheduler).
        slots = 2 * max(1, sum(client.nthreads().values())) + 2
        while len(in_flight) < slots and (item := next(pending, None)) is not None:
            number, group = item
            # The key names the student (safely): it shows on Dask's dashboard and in worker logs.
            key = f"grade-{run}-{number}-{nbgrader_id(group[0].student_id)}-{group[0].assignment}"
            future = client.submit(grade_remotely, plugin_name, [_with_bytes(s) for s in group], key=key, pure=False)
            in_flight[future] = group
        if not in_flight:
            return
        try:
            done = distributed.wait(list(in_flight), timeout=POLL_SECONDS, return_when="FIRST_COMPLETED").done
        except TimeoutError:  # nothing finished yet: submit to workers that joined meanwhile
            continue
        except distributed.client.FuturesCancelledError as err:  # the client gave up reconnecting
            raise ConnectionError(_lost(client)) from err
        for future in done:
            group = in_flight.pop(future)
            yield _outcome(future, group, course, client)
            future.release()


def _with_bytes(sub: Submission) -> tuple[Submission, bytes | None]:
    """The submission without its path on this machine, and the notebook's bytes if it is to be read.
    The file is opened as ``load_notebook`` opens it (no link followed, a size limit); a file it
    cannot read keeps the reason ``load_notebook`` gives, as a refusal, so the result is the same."""
    if sub.path is None or sub.refused:
        return replace(sub, path=None), None
    try:
        with open(os.open(sub.path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as file:
            if os.fstat(file.fileno()).st_size > MAX_NOTEBOOK_BYTES:
                load_notebook(sub.path)  # raises its 'over the limit' reason
            return replace(sub, path=None), file.read(MAX_NOTEBOOK_BYTES + 1)
    except (ValueError, OSError) as err:
        return replace(sub, path=None, refused=str(err)), None


def _outcome(future, group: Sequence[Submission], course: Course, client) -> Graded:
    try:
        return future.result()
    except distributed.client.FutureCancelledError as err:
        raise ConnectionError(_lost(client)) from err
    except Exception as err:  # noqa: BLE001 - whatever happened, only to this group
        if isinstance(err, KilledWorker):
            tries = err.allowed_failures + 1
            reason = (f"grading failed: the grading worker died while grading this notebook, {tries} times "
                      "(Dask gives up after distributed.scheduler.allowed-failures); it was not graded")
        else:
            reason = f"grading worker failed: {type(err).__name__}: {err}"
        return [(NotebookResult.failed(s.student_id, s.assignment, s.notebook, Status.ERROR,
                                       course.max_score(s.assignment, s.notebook), reason), None) for s in group]


def _lost(client) -> str:
    return (f"lost the Dask scheduler at {client.scheduler.address} during the run: no results were written "
            "(run the command again once the scheduler is back)")
