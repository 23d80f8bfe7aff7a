"""Where the course's files are: the repository, its source notebooks (solutions/) and the
released ones (exercises/), and which assignments a source folder holds. A module of its own,
light, so that the command line can name them as defaults, and find a class, without loading
nbgrader."""
from __future__ import annotations

from pathlib import Path

from autograder.errors import CourseError

REPO_ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS_DIR = REPO_ROOT / "solutions"
EXERCISES_DIR = REPO_ROOT / "exercises"


def find_assignments(source_dir: Path) -> list[str]:
    """Assignment ids: the folders of ``source_dir`` that hold at least one notebook."""
    if not source_dir.is_dir():
        raise CourseError(f"no source folder at {source_dir}")
    return sorted(d.name for d in source_dir.iterdir() if d.is_dir() and any(d.glob("*.ipynb")))
