"""A Dask worker preload for tests/test_cluster.py (``dask worker --preload tests/cluster_saboteur.py``):
it kills its own worker process with SIGKILL whenever that worker starts grading the student
named in $AUTOGRADER_TEST_WORKER_KILLER, and does nothing else.

It stands in for a notebook that kills every worker it lands on: a real notebook cannot, as
its kernel runs in a sandbox under another uid and pid namespace and cannot signal the worker.
"""
from __future__ import annotations

import os
import signal

from distributed import WorkerPlugin

KILLER = os.environ.get("AUTOGRADER_TEST_WORKER_KILLER", "")


class KillOnStudent(WorkerPlugin):
    def transition(self, key, start, finish, **kwargs):
        # The task's key names the student (autograder/engine/cluster.py: grade-<run>-<n>-<student>-<assignment>).
        if KILLER and finish == "executing" and f"-{KILLER}-" in str(key):
            os.kill(os.getpid(), signal.SIGKILL)


async def dask_setup(worker):
    await worker.plugin_add(KillOnStudent(), name="test-kill-on-student")
