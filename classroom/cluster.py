"""A local Dask cluster (tests/test_cluster.py, tests/test_service_dask.py, benchmarks/cluster.py):
`dask scheduler` and `dask worker` processes started from the venv's CLI as an instructor starts
them, each in a session of its own, and stopped as an instructor stops them.

`distributed` is imported only to wait for the workers: every test imports ``classroom``, and
Colab and laptops may skip `distributed` (tests/test_cluster.py skips itself then)."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from classroom import REPO

DASK = Path(sys.executable).with_name("dask")
SCHEDULER_FILE_TIMEOUT = 120  # seconds a scheduler is given to write its scheduler file


class LocalDask:
    """A scheduler, and ``worker_commands`` commands `dask worker --nworkers NWORKERS` (one of 1
    per worker where a test kills single workers, one of N where a machine's workers start as the
    documentation starts them, docs/instructors/cluster.md) with ``worker_options`` (preloads). ``env``: all processes' environment
    (None: this process's). ``logs``: each process's output in FOLDER/NAME.log, else discarded.

    It returns once the scheduler has written ``.file`` (in FOLDER), and with ``wait_for_workers``
    (seconds) once every worker process has joined it; a cluster that does not start is stopped
    before the error is raised."""

    def __init__(self, folder: Path, worker_commands: int = 1, nworkers: int = 1, worker_options: Sequence = (),
                 env: dict[str, str] | None = None, logs: bool = True, wait_for_workers: float | None = None):
        self.folder, self.file, self.env, self.logs = folder, folder / "scheduler.json", env, logs
        folder.mkdir(parents=True, exist_ok=True)
        self.file.unlink(missing_ok=True)  # a killed scheduler leaves its file, which would be taken for this one's
        self.scheduler = self._start("scheduler", ["scheduler", "--host", "127.0.0.1", "--port", "0",
                                                   "--no-dashboard", "--scheduler-file", self.file])
        # Started at once: a worker waits for the scheduler file itself.
        self.workers = [self._start(f"worker-{i}", ["worker", "--scheduler-file", self.file, "--nworkers", nworkers,
                                                     "--nthreads", "1", "--no-dashboard", *worker_options])
                        for i in range(worker_commands)]
        try:
            self._wait_for_scheduler_file()
            if wait_for_workers is not None:
                from distributed import Client  # here: see the module's docstring

                with Client(scheduler_file=str(self.file), timeout=60) as client:
                    client.wait_for_workers(worker_commands * nworkers, timeout=wait_for_workers)
        except BaseException:
            LocalDask.stop(self)  # not a subclass's stop: that may stop what its __init__ has not made yet
            raise

    def _start(self, name: str, arguments: list) -> subprocess.Popen:
        output = open(self.folder / f"{name}.log", "w") if self.logs else contextlib.nullcontext(subprocess.DEVNULL)
        with output as stdout:  # closed here once the process has its own copy
            return subprocess.Popen([str(a) for a in [DASK, *arguments]], env=self.env, stdout=stdout,
                                    stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)

    def _wait_for_scheduler_file(self) -> None:
        deadline = time.monotonic() + SCHEDULER_FILE_TIMEOUT
        while not self.file.exists():
            status = self.scheduler.poll()
            if status is not None or time.monotonic() > deadline:
                why = f"it ended with status {status}" if status is not None else f"not in {SCHEDULER_FILE_TIMEOUT} s"
                log = f"; see {self.folder / 'scheduler.log'}" if self.logs else ""
                raise RuntimeError(f"`dask scheduler` wrote no {self.file}: {why}{log}")
            time.sleep(0.2)

    def stop(self) -> None:
        """The `dask worker` processes stopped as an instructor stops them (SIGTERM: each stops the
        sandbox it keeps between runs as it ends), then the process groups of all killed with
        whatever is left."""
        for process in self.workers:
            process.terminate()
        for process in self.workers:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        for process in [self.scheduler, *self.workers]:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()
