"""The functional publish scan (autograder.instructor.functional, issue 48): a working
implementation of a graded function under another name, wherever students would get it (a book
module, a page's code cell, a module of the wheel), earns that name's points on the hidden cases
and is reported with its file, its name and the points; code that earns nothing is not."""
from __future__ import annotations

import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from autograder.instructor.functional import LEAK_SHARE, definitions, functional_scan, sandbox_problem

pytestmark = pytest.mark.slow  # a child process in bubblewrap that runs the hidden cases

MODULE = '''\
import torch


def upper_triangle(size, device=None):
    """causal_mask under another name."""
    i = torch.arange(size, device=device)
    return i[None, :] > i[:, None]


def unrelated(a, b):
    return a + b
'''

PAGE = '''\
# A chapter

```{code-cell} ipython3
---
tags: [hide-input]
---
import torch

def tokens_equal_to(tokens, pad_id=0):  # padding_mask under another name, in a cell with options
    return tokens == pad_id
```

```{code-cell} ipython3
:tags: [hide-output]

tokens_equal_to(torch.tensor([[1, 0]]))  # an experiment: never run by the scan
raise SystemExit("a page's experiment ran")
```
'''

WHEEL_MODULE = '''\
def scores_of(k, q):
    """scaled_scores with its arguments the other way round."""
    return q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
'''


def _venv_under_tmp(tmp: Path) -> Path:
    """This virtual environment as one that lives under /tmp (its configuration, its interpreter and
    its packages, by links), where the scan's sandbox has a /tmp of its own: its interpreter."""
    root = tmp / "venv"
    (root / "bin").mkdir(parents=True)
    shutil.copy2(Path(sys.prefix) / "pyvenv.cfg", root / "pyvenv.cfg")
    (root / "bin" / "python").symlink_to(Path(sys.executable).resolve())
    (root / "lib").symlink_to(Path(sys.prefix) / "lib")
    return root / "bin" / "python"


def test_working_implementations_under_other_names_fail_and_others_do_not(tmp_path):
    """With an interpreter that lives under /tmp, which the sandbox's own /tmp used to hide (issue
    61): a virtual environment there, made of the suite's own (`make` runs the suite in one)."""
    with tempfile.TemporaryDirectory(prefix="venv-under-tmp-", dir="/tmp") as tmp:
        python = str(_venv_under_tmp(Path(tmp))) if sys.prefix != sys.base_prefix else sys.executable
        assert sandbox_problem(python) is None  # publish's check before it builds anything
        _planted_implementations_are_found(tmp_path, python)


def _planted_implementations_are_found(tmp_path: Path, python: str) -> None:
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "helpers.py").write_text(MODULE)
    (tmp_path / "book" / "chapter.md").write_text(PAGE)
    (tmp_path / "dist").mkdir()
    with zipfile.ZipFile(tmp_path / "dist" / "checks-0-py3-none-any.whl", "w") as wheel:
        wheel.writestr("planted/__init__.py", "")
        wheel.writestr("planted/scores.py", WHEEL_MODULE)
    report = functional_scan(tmp_path, python=python)
    print(report.summary())  # the figures, for the record (pytest -s)
    found = {(e.file, e.function, e.graded): e for e in report.earned}
    assert set(found) == {("book/helpers.py", "upper_triangle", "causal_mask"),
                          ("book/chapter.md", "tokens_equal_to", "padding_mask"),
                          ("dist/checks-0-py3-none-any.whl!planted/scores.py", "scores_of", "scaled_scores")}, \
        [e.line() for e in report.earned]
    for earned in found.values():
        assert earned.points > LEAK_SHARE * earned.of and earned.of > 0
    assert "in the order (1, 0)" in found["dist/checks-0-py3-none-any.whl!planted/scores.py", "scores_of",
                                          "scaled_scores"].adapter
    assert "book/helpers.py: upper_triangle earns" in found["book/helpers.py", "upper_triangle", "causal_mask"].line()
    assert report.candidates == 4 and report.problems == []


def test_only_imports_and_definitions_run():
    tree = definitions("import torch\nx = torch.ones(3)\nf = lambda t: t\ndef g():\n    return 1\nprint(x)\n%time g()\n")
    assert [type(node).__name__ for node in tree.body] == ["Import", "Assign", "FunctionDef"]


def test_the_dry_run_names_an_interpreter_that_cannot_run(tmp_path):
    problem = sandbox_problem(str(tmp_path / "no-python"))
    assert problem is not None and "no-python" in problem
