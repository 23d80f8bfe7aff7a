import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

# Lets tests import the helpers in this folder (graded_classes.py, head_start.py, browsing.py, ...); what
# tests and benchmarks share is the package classroom/, at the repository's root (pytest's pythonpath).
sys.path.insert(0, str(Path(__file__).resolve().parent))

import head_start  # noqa: E402
import torch  # noqa: E402
from graded_classes import ask_for, asks_for, graded  # noqa: E402,F401  - each assignment's class, graded once per session
from head_start import published, published_site, site  # noqa: E402,F401  - built in the background
from browsing import artifacts, chromium, site_url  # noqa: E402,F401  - a browser per test file that asks for one

# Generated courses are kept for the session's own runs only: never read from, nor left in, the
# user's cache folder (autograder/grading/course_cache.py).
_COURSE_CACHE = tempfile.mkdtemp(prefix="course-cache-")
os.environ["AUTOGRADER_COURSE_CACHE"] = _COURSE_CACHE
atexit.register(shutil.rmtree, _COURSE_CACHE, ignore_errors=True)

# `make test` runs this session inside make: a make the tests start would inherit its level and
# flags, and print "Entering directory" lines (and share its jobs) that a direct run never sees.
for make_variable in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES"):
    os.environ.pop(make_variable, None)

# Each of the session's test processes computes with its share of the cores: PyTorch's threads,
# one per core in every process, would outnumber them and wait on each other (in-process checks
# ran 2.5 times as long in two processes as in one). Grading kernels use one thread anyway.
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))


def pytest_collection_modifyitems(items):
    """Whole files in the order collected, except: the first file that judges the graded classes
    runs first, as it grades them (the session's longest chain of work), and the files that
    mostly wait (marked ``waits``) next, beside that grading, which keeps the cores busy while
    they wait; the others that judge the classes after every other file, when the classes are
    graded; last of all, the files that test the books and the distribution, so that their slow
    preparations (started as the session begins) run beside the rest. Whole files, for `make
    test` hands each file to one test process (xdist's --dist loadfile)."""
    judging = list(dict.fromkeys(item.path for item in items if asks_for(item)))
    prepared = {item.path for item in items if head_start.needs_preparation(item)}

    def place(item: pytest.Item) -> int:
        if item.path in prepared:
            return 4
        if item.path in judging:
            return 0 if item.path == judging[0] else 3
        return 1 if item.get_closest_marker("waits") else 2

    items.sort(key=place)


def pytest_collection_finish(session):
    ask_for(session.items)  # the classes graded together, when the first is asked for


@pytest.fixture(scope="session", autouse=True)
def _preparations(request, tmp_path_factory):
    head_start.start(request.session.items, tmp_path_factory)
    yield
    head_start.finish()  # another test process may be waiting for what this one claimed
