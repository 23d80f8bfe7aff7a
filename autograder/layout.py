"""Where the course's files are: the repository, its source notebooks (solutions/) and the
released ones (exercises/). A module of its own, light, so that the command line can name
them as defaults without loading nbgrader."""
from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS_DIR = REPO_ROOT / "solutions"
EXERCISES_DIR = REPO_ROOT / "exercises"
