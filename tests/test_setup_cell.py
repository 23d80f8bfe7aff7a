"""The exercises' setup cell, where the checks are not at hand (Colab, a notebook on its own) and
pip cannot fetch them (offline): it fails within seconds, and Jupyter shows one paragraph that
says what to do, not the installer's code. A test cell run where the setup cell failed, or never
ran (a restarted runtime), says to run it."""
from __future__ import annotations

import time

import nbformat
import pytest

from autograder.cells import is_test_cell
from autograder.grading import release
from autograder.layout import EXERCISES_DIR

pytestmark = pytest.mark.slow  # runs a kernel


def offline_setup_cell() -> str:
    """A setup cell of the released form whose checks cannot be installed."""
    return release.FALLBACK.format(
        # offline: nothing answers (a closed port on this machine: the connection is refused)
        requirement="attention-checks @ http://127.0.0.1:9/attention_checks-9.9.9-py3-none-any.whl",
        version="9.9.9", index="", sha256="", repository="https://course.invalid/attention-from-scratch",
        distribution="attention-checks")


def released_test_cells() -> list:
    """Every test cell of the released notebooks that calls a check (the others are comments)."""
    return [cell for path in sorted(EXERCISES_DIR.glob("*/*.ipynb")) for cell in nbformat.read(path, as_version=4).cells
            if is_test_cell(cell) and "check_" in cell.source]


def run_in_one_kernel(cells: list, folder) -> list[float]:
    """Run ``cells`` (their outputs kept in them) in one fresh kernel working in ``folder``; returns
    the seconds each took."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=cells)
    client = NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(folder)}})  # no attention_checks above it
    seconds = []
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            start = time.perf_counter()
            client.execute_cell(cell, index)
            seconds.append(time.perf_counter() - start)
    return seconds


def test_the_setup_cell_offline_fails_within_5_seconds_with_one_paragraph(tmp_path):
    cells = [nbformat.v4.new_code_cell("import sys"), nbformat.v4.new_code_cell(offline_setup_cell())]
    seconds = run_in_one_kernel(cells, tmp_path)[1]  # after the first cell: the kernel is up
    (error,) = [o for o in cells[1].outputs if o.output_type == "error"]
    assert error.ename == "ImportError"
    assert len(error.traceback) == 1, error.traceback  # one paragraph: no installer code, no frames
    paragraph = error.traceback[0]
    assert paragraph.startswith("ImportError: Could not install the course's check helpers 9.9.9 with pip ("), paragraph
    assert "127.0.0.1" in paragraph and "\x1b" not in paragraph  # pip's reason, without its colours
    assert "git clone https://course.invalid/attention-from-scratch" in paragraph and "subprocess" not in paragraph
    assert seconds < 5, f"the setup cell took {seconds:.1f} s to fail offline"


def test_a_test_cell_run_before_the_setup_cell_says_to_run_it(tmp_path):
    """Every released test cell, in a kernel where no setup cell ran: it names its check and says
    where it comes from, instead of a bare NameError."""
    cells = released_test_cells()
    assert len(cells) >= 50
    run_in_one_kernel(cells, tmp_path)
    for cell in cells:
        (error,) = [o for o in cell.outputs if o.output_type == "error"]
        assert error.ename == "NameError", cell.source
        assert error.evalue.endswith("comes from the setup cell at the top of this notebook: run that cell first")
        assert error.evalue.split()[0] in cell.source  # the check this cell calls


def test_a_test_cell_run_after_a_failed_setup_cell_says_why_it_failed(tmp_path):
    (test_cell,) = released_test_cells()[:1]
    cells = [nbformat.v4.new_code_cell(offline_setup_cell()), test_cell]
    run_in_one_kernel(cells, tmp_path)
    (error,) = [o for o in cells[1].outputs if o.output_type == "error"]
    shown = "\n".join(error.traceback)
    assert "run that cell first" in shown and "could not install the checks" in shown
