"""What every process of the grader sets up, in one place: the command line, the local
grading workers, the service's workers and a Dask worker's course plugin."""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import warnings
from pathlib import Path
from typing import Iterator

PR_SET_PDEATHSIG = 1


def prepare_process() -> None:
    """nbgrader runs tools of its environment (alembic) by name: find them without an activated
    venv. nbgrader's gradebook code trips SQLAlchemy 2 warnings that say nothing to an instructor."""
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
    warnings.filterwarnings("ignore", module="nbgrader")


def die_with_parent(parent_pid: int) -> None:
    """A worker whose parent (the CLI, the service) is killed would wait for work forever, holding
    its sandbox: the kernel kills it with its parent (and bwrap, in turn, the sandbox), or it
    leaves now if the parent died while it was starting."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent_pid:
            os._exit(1)


@contextlib.contextmanager
def kernel_environment() -> Iterator[None]:
    """The environment of grading kernels that run without a sandbox (the sandbox sets its own):
    the check helpers importable, and what every grading kernel has (sandbox.KERNEL_ENVIRONMENT);
    the process's own environment again afterwards."""
    from autograder.layout import REPO_ROOT
    from autograder.sandbox.kernels import KERNEL_ENVIRONMENT

    saved = dict(os.environ)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    os.environ.update(KERNEL_ENVIRONMENT)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
