"""What every process of the grader sets up, in one place: the command line, the local
grading workers, the service's workers and a Dask worker's course plugin."""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import multiprocessing
import os
import select
import signal
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Iterator, NoReturn

PR_SET_PDEATHSIG = 1


def prepare_process() -> None:
    """nbgrader runs tools of its environment (alembic) by name: find them without an activated
    venv. nbgrader's gradebook code trips SQLAlchemy 2 warnings that say nothing to an instructor.
    And PyTorch gets one thread (``one_thread``)."""
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
    warnings.filterwarnings("ignore", module="nbgrader")
    one_thread()


def one_thread() -> None:
    """PyTorch in the grader's own processes judges test-sized tensors, which no operator splits
    between threads, so more threads only add their overhead; with several workers on few cores
    their idle threads spin against each other. On 2 cores, a class of 08 graded with `--jobs 2`
    took twice the CPU of `--jobs 1` for the same wall time, and half with one thread each
    (issue 32). PyTorch reads OMP_NUM_THREADS when it loads, so it is set before; a process that
    has loaded it already is told directly. Processes started from here (a pool's fork server)
    inherit it. Kernels have one thread too (``sandbox.bwrap.KERNEL_ENVIRONMENT``)."""
    os.environ["OMP_NUM_THREADS"] = "1"
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def exit_now(status: int) -> NoReturn:
    """End this process with ``status`` once its exit handlers have run (they stop the sandboxes
    and remove their scratch folders) and its output is written, without Python's teardown, which
    frees every module and object one by one: with nbgrader and PyTorch loaded that took 0.7-0.9 s
    of a one-notebook `grade`'s 4-5 s (issue 32), and leaves nothing behind that the system does
    not reclaim at once. A thread that is not a daemon still gets Python's usual wait, and a
    profiler or debugger (``python -m cProfile -m autograder``) Python's usual exit, after which
    it writes what it saw."""
    threads = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if any(t.is_alive() for t in threads) or sys.getprofile() or sys.gettrace():
        sys.exit(status)
    atexit._run_exitfuncs()  # what Python runs at exit, each handler once
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that has gone: nothing more can be said to it
            pass
    os._exit(status)


def _exit_with_grader(grader_pid: int) -> None:
    """A worker whose grader (the CLI, the service) is killed would wait for work forever, holding
    its sandbox (and bwrap, in turn, takes the sandbox down with the worker). The worker's parent
    is multiprocessing's fork server, which leaves only once every worker has gone (each holds
    the pipe it waits on), so the worker watches the grader itself: it exits the moment the
    grader's process ends (a pidfd), or now if the grader died while it was starting. The kernel
    also kills it with the fork server."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    threading.Thread(target=_wait_then_exit, args=(grader_pid,), name="exit-with-grader", daemon=True).start()


def _wait_then_exit(pid: int) -> None:
    try:
        process = os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(1)
    except (AttributeError, OSError):  # no pidfds (not Linux, or before 5.3): look every second
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                os._exit(1)
            time.sleep(1)
    select.select([process], [], [])  # readable once the process has ended
    os._exit(1)


def worker_context(*modules: str) -> multiprocessing.context.BaseContext:
    """How grading workers start: forked from one process that imported the grader (nbgrader,
    PyTorch) once, multiprocessing's fork server, instead of each importing it afresh (seconds
    of CPU per worker); the fork server itself is single-threaded, so forking it is safe.
    ``modules``: what the fork server imports, the module that defines the workers' initializer
    and task and what they grade with (``grading.steps.WORKER_MODULES``). The first pool of a
    process decides; a later one's modules are imported by its workers when they need them."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(modules))
    return context


def start_workers_early(*modules: str) -> None:
    """Start the fork server of ``worker_context`` now, so that its imports run beside the caller's
    own (on another core) instead of after them, when the first worker is needed."""
    from multiprocessing import forkserver

    worker_context(*modules)
    forkserver.ensure_running()


def prepare_worker(grader_pid: int) -> None:
    """A grading worker's process: it dies with its grader, finds nbgrader's tools, and gives its
    kernels their environment (whatever the environment of the fork server it came from)."""
    _exit_with_grader(grader_pid)
    prepare_process()
    _set_kernel_environment()


def _set_kernel_environment() -> None:
    from autograder.layout import REPO_ROOT
    from autograder.sandbox.bwrap import KERNEL_ENVIRONMENT

    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT)] + [p for p in paths if p != str(REPO_ROOT)])
    os.environ.update(KERNEL_ENVIRONMENT)


@contextlib.contextmanager
def kernel_environment() -> Iterator[None]:
    """The environment of grading kernels that run without a sandbox (the sandbox sets its own):
    the check helpers importable, and what every grading kernel has (sandbox.KERNEL_ENVIRONMENT);
    the process's own environment again afterwards."""
    saved = dict(os.environ)
    _set_kernel_environment()
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
