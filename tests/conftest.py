import sys
from pathlib import Path

# Lets tests import the helpers in this folder (graded_classes.py, headless.py); what tests and
# benchmarks share is the package classroom/, at the repository's root (pytest's pythonpath).
sys.path.insert(0, str(Path(__file__).resolve().parent))

from classroom.site import site  # noqa: E402,F401  - the built book, one build per test session
from graded_classes import ask_for, graded  # noqa: E402,F401  - each assignment's class, graded once per session


def pytest_collection_finish(session):
    ask_for(session.items)  # the classes graded together, when the first is asked for
