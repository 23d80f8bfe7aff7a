import sys
from pathlib import Path

# Lets tests import the shared helpers in this folder (classroom.py, site_build.py, headless.py).
sys.path.insert(0, str(Path(__file__).resolve().parent))

from site_build import site  # noqa: E402,F401  - the built book, one build per test session
