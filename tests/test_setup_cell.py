"""The exercises' setup cell, where the checks are not at hand (Colab, a notebook on its own) and
pip cannot fetch them (offline): it fails within seconds, and Jupyter shows one paragraph that
says what to do, not the installer's code."""
from __future__ import annotations

import time

import nbformat
import pytest

from autograder.grading import release

pytestmark = pytest.mark.slow  # runs a kernel


def test_the_setup_cell_offline_fails_within_5_seconds_with_one_paragraph(tmp_path):
    from nbclient import NotebookClient

    fallback = release.FALLBACK.format(
        # offline: nothing answers (a closed port on this machine: the connection is refused)
        requirement="attention-checks @ http://127.0.0.1:9/attention_checks-9.9.9-py3-none-any.whl",
        version="9.9.9", index="", sha256="", repository="https://course.invalid/attention-from-scratch",
        distribution="attention-checks")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import sys"),
                                         nbformat.v4.new_code_cell(fallback)])
    client = NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(tmp_path)}})  # no attention_checks above it
    with client.setup_kernel():
        client.execute_cell(nb.cells[0], 0)  # the kernel is up
        start = time.perf_counter()
        client.execute_cell(nb.cells[1], 1)
        seconds = time.perf_counter() - start
    (error,) = [o for o in nb.cells[1].outputs if o.output_type == "error"]
    assert error.ename == "ImportError"
    assert len(error.traceback) == 1, error.traceback  # one paragraph: no installer code, no frames
    paragraph = error.traceback[0]
    assert paragraph.startswith("ImportError: Could not install the course's check helpers 9.9.9 with pip ("), paragraph
    assert "127.0.0.1" in paragraph and "\x1b" not in paragraph  # pip's reason, without its colours
    assert "git clone https://course.invalid/attention-from-scratch" in paragraph and "subprocess" not in paragraph
    assert seconds < 5, f"the setup cell took {seconds:.1f} s to fail offline"
