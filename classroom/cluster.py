"""Stopping a local Dask cluster's processes (tests/test_cluster.py, tests/test_service_dask.py,
benchmarks/cluster.py), each started in a session of its own."""
from __future__ import annotations

import os
import signal
import subprocess
from typing import Iterable


def stop_dask(workers: Iterable[subprocess.Popen], others: Iterable[subprocess.Popen] = ()) -> None:
    """The `dask worker` processes stopped as an instructor stops them (SIGTERM: each stops the
    sandbox it keeps between runs as it ends), then the process groups of all (the scheduler's in
    ``others``) killed with whatever is left."""
    workers = list(workers)
    for process in workers:
        process.terminate()
    for process in workers:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
    for process in [*others, *workers]:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
