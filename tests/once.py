"""Slow preparations made once for all of a session's test processes.

`make test` runs the suite in two processes (pytest-xdist's workers). A session-scoped fixture
runs in each of them, so a slow one (a class graded, a book built) would be made twice. Instead,
the first process to need it *claims* it (creating a folder is atomic: one process succeeds),
makes it and *publishes* the outcome, pickled, in a folder all the processes share; the others
wait for that file. Without xdist, the one process claims everything, as before.

What is published must be picklable and hold only paths every process can read (the claiming
process's temporary folders are kept until the session ends).
"""
from __future__ import annotations

import os
import pickle
import time
from pathlib import Path
from typing import Any

import pytest

WAIT_LIMIT = 3600  # seconds a process waits for another's preparation before it gives up


def several_processes() -> bool:
    """Whether this process is one of several running the session (an xdist worker)."""
    return "PYTEST_XDIST_WORKER" in os.environ


def shared_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this session that all its processes see: with xdist, the parent of the
    workers' own temporary folders (pytest-N/popen-gwK); without, the session's own."""
    own = tmp_path_factory.getbasetemp()
    return own.parent if several_processes() else own


class Once:
    """One preparation of the session, by name: ``claim()`` says whether this process makes it;
    the maker ``publish``es its value or ``fail``s it, and any process can ``wait()`` for it."""

    def __init__(self, folder: Path, name: str):
        self.name = name
        self._claim = folder / f"{name}.claimed"
        self._outcome = folder / f"{name}.outcome"

    def claim(self) -> bool:
        try:
            self._claim.mkdir()
        except FileExistsError:
            return False
        return True

    @property
    def claimed(self) -> bool:
        """By any process of the session."""
        return self._claim.is_dir()

    def publish(self, value: Any) -> None:
        self._write((None, value))

    def fail(self, message: str) -> None:
        """Every test that needs this preparation fails with ``message``, without making it again."""
        self._write((message, None))

    def _write(self, outcome: tuple[str | None, Any]) -> None:
        partial = self._outcome.with_suffix(".partial")
        partial.write_bytes(pickle.dumps(outcome))
        partial.replace(self._outcome)  # whole or not at all, for a process reading it now

    def done(self) -> bool:
        return self._outcome.exists()

    def wait(self) -> None:
        """Until the process that claimed this preparation has published it (at once if no
        process claimed it)."""
        deadline = time.monotonic() + WAIT_LIMIT
        while self.claimed and not self.done():
            if time.monotonic() > deadline:
                pytest.fail(f"{self.name}: not prepared after {WAIT_LIMIT} s by the test process that "
                            f"claimed it ({self._claim})", pytrace=False)
            time.sleep(0.5)

    def value(self) -> Any:
        """The published value, once there is one; a failed preparation fails the test."""
        self.wait()
        assert self.done(), f"{self.name} was never claimed (conftest.py starts the preparations)"
        failure, value = pickle.loads(self._outcome.read_bytes())
        if failure is not None:
            pytest.fail(failure, pytrace=False)
        return value
