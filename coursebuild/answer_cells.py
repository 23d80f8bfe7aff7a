"""The values a page shows from its answer cells, computed at build time; the page loads them.

A chapter's cells that compute what an exercise grades (chapter 07's additive scores and
attention pooling, chapter 09's online softmax and tiled attention, chapter 08's greedy decoding
where chapter 09 runs it) are tagged ``answers:<assignment>``: the students' edition of a course
taken for credit withholds them until the deadline (autograder.instructor.publish). What the page
prints, draws and glues after them comes from book/data/<file> (``stored.load``), which this
module writes by running the page itself, top to bottom, as the self-study book runs it (its
figures drawn off screen, its output discarded): the values named in ``stored`` are the page's
own, and while it runs, the page's ``stored.load(<file>)`` reads them from the run. Timings are
those of the machine that built the file, after ``learning.seed_everything(0)`` (one thread).
"""
from __future__ import annotations

import ast
import contextlib
import io
import os
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import learning
import stored as book_stored
from autograder.instructor.functional import CODE_CELL, cell_parts
from autograder.instructor.publish import answer_cells
from coursebuild import BOOK


class _FromTheRun(Mapping):
    """The page's stored values as its answer cells have left them so far."""

    def __init__(self, values: dict, names: tuple[str, ...]):
        self.values, self.names = values, names

    def __getitem__(self, name: str):
        if name not in self.names:
            raise KeyError(name)
        return self.values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)


def assigned(tree: ast.Module) -> set[str]:
    """The names a cell's code binds at the top level (not inside its functions and classes)."""
    found: set[str] = set()
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
            continue
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue  # a scope of its own
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
        todo.extend(ast.iter_child_nodes(node))
    return found


def run_page(page: Path, file: str, names: tuple[str, ...]) -> dict:
    """The values ``names`` as the answer cells of ``page`` bind them (a later cell may reuse a
    name), after all its code cells ran in order (IPython's magics dropped), its
    ``stored.load(file)`` answered with them."""
    namespace: dict = {"__name__": "__main__"}
    values: dict = {}
    own = types.ModuleType("stored", book_stored.__doc__)
    own.__dict__.update({name: value for name, value in vars(book_stored).items() if not name.startswith("__")})
    own.load = lambda name: _FromTheRun(values, names) if name == file else book_stored.load(name)
    previous = sys.modules.get("stored")
    sys.modules["stored"] = own
    os.environ.setdefault("MPLBACKEND", "Agg")  # figures drawn off screen
    answers = {cell.span for cell in answer_cells(page)}  # tagged as publish reads the tags
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the page prints what it shows from the results
            for cell in CODE_CELL.finditer(page.read_text(encoding="utf-8")):
                code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line
                                 for line in cell_parts(cell["body"])[1].split("\n"))
                tree = ast.parse(code)
                exec(compile(tree, str(page), "exec"), namespace)  # noqa: S102 - the book's own code
                if cell.span() in answers:
                    values.update({name: namespace[name] for name in assigned(tree) & set(names)})
    finally:
        sys.modules["stored"] = previous if previous is not None else book_stored
    return values


@dataclass(frozen=True)
class PageResults:
    """The values ``stored`` that a page's answer cells compute, as book/data/<file>."""

    file: str
    page: str  # under book/
    stored: tuple[str, ...]
    also: tuple[str, ...] = ()  # what else, relative to the repository, decides them (a trained model)
    steps: int = 1  # for the progress bar: the page runs as one step

    @property
    def sources(self) -> list[str]:
        return ["coursebuild/answer_cells.py", f"book/{self.page}", "book/learning.py", "book/plots.py", *self.also]

    def build(self, progress: Callable[[int], None]) -> dict:
        learning.seed_everything(0)  # as the page's first cells: one thread, deterministic kernels
        values = run_page(BOOK / self.page, self.file, self.stored)
        progress(1)
        missing = [name for name in self.stored if name not in values]
        if missing:
            raise RuntimeError(f"the answer cells of book/{self.page} no longer compute {', '.join(missing)}")
        return values


PAGES = [
    PageResults("additive-attention.pt", "07-additive-attention.md",
                ("e", "a", "dims", "timings", "memory", "widths", "stats", "curves", "test_accuracy", "answer_weight",
                 "before", "after", "four_heads")),
    PageResults("attention-at-scale.pt", "09-attention-at-scale.md",
                ("example_row", "running", "softmax_error", "row_magnitude", "tiled_error", "tiled",
                 "naive_beside_tiled", "decoded_same", "flops", "seconds"),
                also=("book/transformer.py", "book/online_softmax_frames.py", "book/data/reversal.pt")),
]
