"""Pairwise similarity of the students' own code in one assignment: ``python -m autograder similarity``.

Each student's own code is the code cells they wrote: the solution cells and the cells they
added, never the test cells or the locked cells of the release notebook (setup, instructions).
The released starter code (every code cell of the release notebook: signatures, docstrings,
``raise NotImplementedError()``) is boilerplate: copydetect (a maintained implementation of
MOSS's winnowing, https://github.com/blingenf/copydetect) drops its fingerprints, so students
who share only the starter code share nothing. copydetect tokenises the code first (names
become one symbol, comments and whitespace go), so renamed variables, added comments and
reordered functions still match.

The report is one self-contained HTML file (no script, no network: it opens offline, and what
students wrote is escaped, never run): the pairs ranked by similarity, and for the closest
pairs both students' code side by side with the matching lines marked. A CSV beside it lists
every pair. Similarity is evidence for a person to look at, never a verdict.
"""
from __future__ import annotations

import io
import sys
import tempfile
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import nbformat
import numpy as np
from copydetect import CodeFingerprint, compare_files
from copydetect.defaults import GUARANTEE_THRESHOLD, NOISE_THRESHOLD
from copydetect.utils import highlight_overlap
from markupsafe import Markup, escape

from autograder.cells import nbgrader_metadata
from autograder.errors import InputError
from autograder.instructor import pages
from autograder.layout import EXERCISES_DIR, find_assignments
from autograder.submissions import SubmissionsError, find_root, load_notebook, unpack_zip

WINDOW = GUARANTEE_THRESHOLD - NOISE_THRESHOLD + 1  # copydetect's own window from its thresholds
MARK_START, MARK_END = "\x00", "\x01"  # placeholders around matches, replaced by <mark> after escaping


@dataclass
class Pair:
    first: str
    second: str
    similarity: tuple[float, float]  # the share of each one's own code that matches the other's
    matched_tokens: int
    code: tuple[str, str]  # each one's code, matches between MARK_START and MARK_END

    @property
    def score(self) -> float:
        """The larger share: a student who copied a classmate's whole solution and added more still ranks high."""
        return max(self.similarity)


def own_code(notebook: nbformat.NotebookNode) -> str:
    """The code a student wrote: solution cells and added cells (no nbgrader metadata), without
    test cells, locked cells and IPython's magics and shell lines (not Python to tokenise)."""
    cells = []
    for cell in notebook.cells:
        nbgrader = nbgrader_metadata(cell)
        if cell.cell_type != "code":
            continue
        if nbgrader.get("solution") or not nbgrader.get("grade_id"):
            lines = [line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!"))]
            cells.append("\n".join(lines))
    return "\n\n".join(cells) + "\n"


def starter_code(release_dir: Path, assignment: str) -> str:
    """Every code cell of the assignment's release notebooks: what every student starts from."""
    notebooks = sorted((release_dir / assignment).glob("*.ipynb"))
    if not notebooks:
        raise InputError(f"no release notebooks of {assignment} in {release_dir}")
    return "\n\n".join(c.source for path in notebooks for c in nbformat.read(path, 4).cells if c.cell_type == "code")


def student_notebooks(folder: Path, assignment: str) -> dict[str, list[Path]]:
    """student id -> the assignment's notebooks, from a RESULTS folder (its autograded/ notebooks)
    or a SUBMISSIONS folder (<student>/<assignment>/*.ipynb). Symbolic links are never followed."""
    root = folder / "autograded" if (folder / "results.json").is_file() else find_root(folder, [assignment])
    found = {}
    for student in sorted(root.iterdir()):
        if student.is_symlink() or not (student / assignment).is_dir() or (student / assignment).is_symlink():
            continue
        notebooks = sorted(p for p in (student / assignment).glob("*.ipynb") if p.is_file() and not p.is_symlink())
        if notebooks:
            found[student.name] = notebooks
    return found


def _fingerprint(code: str, boilerplate=None, window: int = WINDOW) -> CodeFingerprint:
    return CodeFingerprint("code.py", NOISE_THRESHOLD, window, boilerplate, language="python", fp=io.StringIO(code))


def compare(codes: dict[str, str], starter: str) -> list[Pair]:
    """Every pair of students, the most similar first."""
    boilerplate = np.unique(np.array(list(_fingerprint(starter, window=1).hashes)))
    prints = {student: _fingerprint(code, boilerplate) for student, code in codes.items()}
    pairs = []
    for first, second in combinations(sorted(prints), 2):
        tokens, similarity, slices = compare_files(prints[first], prints[second])
        marked = tuple(highlight_overlap(prints[s].raw_code, cut, MARK_START, MARK_END)[0] if tokens else prints[s].raw_code
                       for s, cut in zip((first, second), slices))
        pairs.append(Pair(first, second, (float(similarity[0]), float(similarity[1])), int(tokens), marked))
    return sorted(pairs, key=lambda p: (-p.score, -p.matched_tokens, p.first, p.second))


def display_name(name: str) -> str:
    """A student folder name for the page (one that is not UTF-8 is shown with replacement marks)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _marked(code: str) -> Markup:
    """A student's code, escaped, with its matches marked (the template's ``marked`` filter)."""
    return Markup(escape(display_name(code)).replace(MARK_START, Markup("<mark>")).replace(MARK_END, Markup("</mark>")))


def html_report(assignment: str, pairs: list[Pair], students: int, detailed: int) -> str:
    """The page (templates/similarity.html.j2): what students wrote is escaped, never run."""
    environment = pages.environment().overlay()
    environment.filters.update(shown=display_name, marked=_marked)
    return environment.get_template("similarity.html.j2").render(assignment=assignment, pairs=pairs,
                                                                 students=students, detailed=detailed)


def similarity(folder: Path, assignment: str, out: Path, release_dir: Path = EXERCISES_DIR,
               detailed: int = 20) -> list[Pair]:
    """Compare the students of ``assignment`` in ``folder`` (RESULTS or SUBMISSIONS, a folder or
    a .zip); writes ``out`` (HTML) and ``out`` with .csv (every pair); returns the ranked pairs."""
    from autograder.instructor.lms import grading_record, refuse_overwriting, write_csv

    if assignment not in find_assignments(release_dir):
        raise InputError(f"unknown assignment {assignment}; known: {', '.join(find_assignments(release_dir))}")
    pairs_csv = out.with_suffix(".csv")
    # RESULTS: its record; SUBMISSIONS (never modified) or a zip: all of it
    read = grading_record(folder) if (folder / "results.json").is_file() else [folder]
    refuse_overwriting({"--out": out, "the list of pairs (--out with .csv)": pairs_csv},
                       [*read, release_dir / assignment])
    with tempfile.TemporaryDirectory(prefix="autograder-similarity-") as tmp:
        root = unpack_zip(folder, Path(tmp)) if folder.is_file() else folder
        codes, unreadable = {}, []
        for student, notebooks in student_notebooks(root, assignment).items():
            try:
                codes[student] = "\n\n".join(own_code(load_notebook(path)) for path in notebooks)
            except (ValueError, OSError) as err:
                unreadable.append(f"{student}: {err}")
    for line in unreadable:
        print(f"left out: {line}", file=sys.stderr)
    if len(codes) < 2:
        raise SubmissionsError(f"found {len(codes)} students with {assignment} notebooks in {folder}: "
                               "nothing to compare (RESULTS, or SUBMISSIONS/<student>/<assignment>/)")
    pairs = compare(codes, starter_code(release_dir, assignment))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html_report(assignment, pairs, len(codes), min(detailed, len(pairs))), encoding="utf-8")
    write_csv(pairs_csv, ["rank", "student", "other_student", "of_student", "of_other", "matching_tokens"],
              [[rank, display_name(p.first), display_name(p.second), f"{p.similarity[0]:.3f}", f"{p.similarity[1]:.3f}",
                p.matched_tokens] for rank, p in enumerate(pairs, 1)])
    return pairs
