"""Slow preparations started in the background as the session begins: the book built, and the
student distribution published and its book built (fixtures ``site``, ``published`` and
``published_site``).

Each is a subprocess that keeps one core busy for minutes (jupyter-book runs the chapters one at a
time) while the session's tests leave much of the machine idle: started early, at a low
priority, it runs beside the tests that do not need it, in the time they leave. conftest.py
moves the test files that use these fixtures to the end of the session and, before the first
test, starts the preparations the collected tests need, each in the first of the session's test
processes to start it (tests/once.py). A fixture then waits for its preparation, made in this
process or another; one that failed fails each test that needs it, with the same message,
without running again.

To test an existing build of the book instead (quick, e.g. after `make site`), set
COURSE_SITE_HTML=_build/html.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterable

import pytest

from autograder.instructor import publish
from classroom.site import build_site
from once import Once, several_processes, shared_folder

class Preparation:
    """One slow preparation, made once for the session's test processes (tests/once.py): the
    process that claims it makes it in a thread of its own; ``result()`` waits for it."""

    def __init__(self, fixture: str, work: Callable[[Path], Any], needs: tuple[str, ...] = (),
                 after: tuple[str, ...] = ()):
        """``needs``: the preparations whose results ``work`` takes (started with it); ``after``:
        those it waits for when the session needs them too."""
        self.fixture, self.work, self.needs, self.after = fixture, work, needs, after
        self._once: Once | None = None
        self._thread: threading.Thread | None = None

    def start(self, shared: Path) -> None:
        if self._once is None:
            self._once = Once(shared, self.fixture)
            if self._once.claim():  # made in a folder of its own, in the one the processes share
                self._thread = threading.Thread(target=self._run, args=(shared / self.fixture,),
                                                name=f"prepare-{self.fixture}", daemon=True)
                self._thread.start()

    def _run(self, folder: Path) -> None:
        # a low priority for this thread and the processes it starts (on Linux, a thread's own,
        # which its children inherit): they take the time the tests leave idle, and a tenth of a
        # busy core beside them (nice 10), not none: a chapter's cell must end within the
        # build's timeout while a test keeps both cores busy
        with contextlib.suppress(OSError):  # elsewhere than Linux, a thread id may name no process
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        try:
            for name in self.after:
                PREPARATIONS[name].wait()
            folder.mkdir()
            self._once.publish(self.work(folder))
        except pytest.fail.Exception as failure:
            self._once.fail(str(failure))
        except Exception as error:  # noqa: BLE001 - reported to every test that needs it
            self._once.fail(f"{self.fixture}: {type(error).__name__}: {error}")

    def wait(self) -> None:
        """Until it is made, by whichever process claimed it (at once if the session never started it)."""
        if self._once is not None:
            self._once.wait()

    def finish(self) -> None:
        """Until this process has made what it claimed, for the processes that wait for it."""
        if self._thread is not None:
            self._thread.join()

    def result(self) -> Any:
        assert self._once is not None, f"{self.fixture} was never started (conftest.py starts it)"
        return self._once.value()

    def result_if_made(self) -> Any | None:
        """Its result when the session made it; None when it never started or failed (its own
        tests say why)."""
        if self._once is None:
            return None
        try:
            return self._once.value()
        except pytest.fail.Exception:
            return None


def _build_book(folder: Path) -> Path:
    """The book of this clone, built into ``folder`` (its models in the session's cache: ``start``).
    When the session built the distribution's book, its chapters are not run again: their outputs
    come from that build's execution cache (jupyter-cache matches a page by its code, and the
    distribution's pages are this clone's; what the distribution lacks, this clone has), so each
    chapter runs once per session. Without it, this build runs them."""
    existing = os.environ.get("COURSE_SITE_HTML")
    if existing:
        return Path(existing).resolve()
    published_html = PREPARATIONS["published_site"].result_if_made()
    if published_html is not None:
        shutil.copytree(published_html.parent / ".jupyter_cache", folder / "_build" / ".jupyter_cache")
    try:
        return build_site(folder)
    except (AssertionError, subprocess.TimeoutExpired) as error:
        pytest.fail(f"jupyter-book build failed:\n{error}", pytrace=False)


def _publish(tmp: Path) -> tuple[Path, subprocess.CompletedProcess]:
    """`python -m autograder publish DIST`, run from elsewhere: (DIST, the command's output)."""
    dist = tmp / "student-repository"
    run = subprocess.run([sys.executable, "-m", "autograder", "publish", str(dist)], cwd=tmp, capture_output=True,
                         text=True, timeout=1800)
    if not (dist / "dist").is_dir():
        pytest.fail(f"publish made no distribution:\n{run.stdout[-3000:]}{run.stderr[-5000:]}", pytrace=False)
    return dist, run


def _build_published_book(folder: Path) -> Path:
    """The distribution's book, built (as `publish --site` and a student's `make site` build it)
    in a copy of the distribution alone, so that the tests of the distribution itself see it as
    published. It runs every chapter, and trains the models into the session's cache (``start``),
    keyed by the code that trains them, which the distribution copies."""
    dist, _ = PREPARATIONS["published"].result()
    copy = folder / "student-repository"
    shutil.copytree(dist, copy)
    return publish.build_site(copy)


PREPARATIONS = {p.fixture: p for p in [
    Preparation("published", _publish),
    Preparation("published_site", _build_published_book, needs=("published",)),
    # after the distribution's book, whose executed chapters it reuses
    Preparation("site", _build_book, after=("published_site",)),
]}


def _prepared_fixtures(item: pytest.Item) -> set[str]:
    return {name for name in getattr(item, "fixturenames", ()) if name in PREPARATIONS}


def needs_preparation(item: pytest.Item) -> bool:
    return bool(_prepared_fixtures(item))


def start(items: Iterable[pytest.Item], tmp_path_factory: pytest.TempPathFactory) -> None:
    """Start what the tests in ``items`` need (and what that needs): each is claimed by the
    first of the session's processes to start it."""
    shared = shared_folder(tmp_path_factory)
    wanted = set().union(*map(_prepared_fixtures, items))
    for name in reversed(PREPARATIONS):  # each listed after what it needs: the needs of needs too
        if name in wanted:
            wanted.update(PREPARATIONS[name].needs)
    for name, preparation in PREPARATIONS.items():  # in order: each after those it waits for
        if name in wanted:
            preparation.start(shared)


def finish() -> None:
    """At the end of a process's session: the preparations it claimed, made, when other
    processes may wait for them (alone, it leaves them unfinished, as an interrupted run must)."""
    if several_processes():
        for preparation in PREPARATIONS.values():
            preparation.finish()


@pytest.fixture(scope="session")
def site() -> Path:
    """The built site (its _build/html folder)."""
    return PREPARATIONS["site"].result()


@pytest.fixture(scope="session")
def published() -> tuple[Path, subprocess.CompletedProcess]:
    """(DIST, the command's output): `python -m autograder publish DIST`, run from elsewhere."""
    return PREPARATIONS["published"].result()


@pytest.fixture(scope="session")
def published_site() -> Path:
    """The _build/html folder of the distribution's book, built from a copy of the distribution alone."""
    return PREPARATIONS["published_site"].result()
