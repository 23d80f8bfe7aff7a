"""Hostile notebooks against the kernel's limits and its neighbours, graded by the real CLI
in one run with a single worker (``--jobs 1``), so that the students share one sandbox
and its warm fork server, one after another, as in a real class.

Each attack is an honest submission (its twin, as in test_hostile.py) plus a cheat: it
must never earn more than the twin, and the grading of everyone else goes on as usual.
"""
from __future__ import annotations

import threading

import psutil
import pytest

from test_hostile import ASSIGNMENT, Attack, HostileClass, code

PROCESS_LIMIT = 512  # the sandbox's default (SandboxedKernelManager.process_limit)

ATTACKS = [
    # -- processes: bounded whoever starts the grader (root in CI) ---------------------------
    Attack("fork_bomb_2000", "starts processes", code("""
        import os, time
        for _ in range(2000):
            try:
                if os.fork() == 0:
                    time.sleep(120)
                    os._exit(0)
            except OSError:
                pass"""), twin="reference", expect="at_most", status=("ok", "timeout")),
    Attack("process_bomb_subprocess", "starts processes", code("""
        import subprocess
        for _ in range(2000):
            try:
                subprocess.Popen(["sleep", "120"])
            except OSError:
                pass"""), twin="reference", expect="at_most", status=("ok", "timeout")),
]


class ProcessCount(threading.Thread):
    """The largest number of processes below this one (the CLI, its workers and sandboxes)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.most, self.done = 0, threading.Event()

    def run(self):
        me = psutil.Process()
        while not self.done.wait(0.2):
            try:
                self.most = max(self.most, len(me.children(recursive=True)))
            except psutil.Error:
                pass


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    counter = ProcessCount()
    counter.start()
    try:
        graded = HostileClass(tmp_path_factory.mktemp("hostile-kernel"), ATTACKS,
                              ("--jobs", "1", "--cell-timeout", "10", "--notebook-timeout", "30"))
    finally:
        counter.done.set()
        counter.join()
    graded.most_processes = counter.most
    return graded


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_attack_earns_no_more_than_its_honest_twin(hostile, attack):
    row, twin = hostile.row(attack.name), hostile.score(f"twin-{attack.twin}")
    assert row["status"] in ((attack.status,) if isinstance(attack.status, str) else attack.status), row
    assert row["max_score"] == hostile.row("twin-reference")["max_score"]
    assert hostile.score(attack.name) == twin if attack.expect == "equal" else hostile.score(attack.name) <= twin


def test_everyone_else_is_graded_as_usual(hostile):
    full = float(hostile.row("twin-reference")["max_score"])
    assert (hostile.row("twin-reference")["status"], hostile.score("twin-reference")) == ("ok", full)
    assert hostile.row("twin-wrong")["status"] == "ok" and 0 < hostile.score("twin-wrong") < full


def test_process_bombs_are_bounded(hostile):
    # Each bomb tries 2,000 processes; its sandbox holds at most PROCESS_LIMIT, and a few
    # more run beside it (the CLI, the worker, bwrap).
    assert 100 < hostile.most_processes < PROCESS_LIMIT + 50
