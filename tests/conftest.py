import sys
from pathlib import Path

import pytest

# Lets tests import the helpers in this folder (graded_classes.py, head_start.py, headless.py); what
# tests and benchmarks share is the package classroom/, at the repository's root (pytest's pythonpath).
sys.path.insert(0, str(Path(__file__).resolve().parent))

import head_start  # noqa: E402
from graded_classes import ask_for, graded  # noqa: E402,F401  - each assignment's class, graded once per session
from head_start import published, published_site, site  # noqa: E402,F401  - built in the background


def pytest_collection_modifyitems(items):
    # the files that test the books and the distribution last, so that their slow preparations
    # (started as the session begins) run beside the others: whole files, for `make test` hands
    # each file to one test process (xdist's --dist loadfile); otherwise in their order
    prepared_files = {item.path for item in items if head_start.needs_preparation(item)}
    items.sort(key=lambda item: item.path in prepared_files)


def pytest_collection_finish(session):
    ask_for(session.items)  # the classes graded together, when the first is asked for


@pytest.fixture(scope="session", autouse=True)
def _preparations(request, tmp_path_factory):
    head_start.start(request.session.items, tmp_path_factory)
    yield
    head_start.finish()  # another test process may be waiting for what this one claimed
