"""The exercises' setup cell, where the checks are not at hand (Colab, a notebook on its own) and
pip cannot fetch them (offline): it fails within seconds, and Jupyter shows one paragraph that
says what to do, not the installer's code. A test cell run where the setup cell failed, or never
ran (a restarted runtime), says to run it."""
from __future__ import annotations

import socket
import time

import nbformat
import pytest

from autograder.cells import is_test_cell
from autograder.grading import release
from autograder.layout import EXERCISES_DIR

pytestmark = pytest.mark.slow  # runs a kernel


def offline_setup_cell(url: str = "http://127.0.0.1:9/attention_checks-9.9.9-py3-none-any.whl") -> str:
    """A setup cell of the released form whose checks cannot be installed: by default nothing
    answers (a closed port on this machine: the connection is refused)."""
    return release.FALLBACK.format(
        requirement=f"attention-checks @ {url}", version="9.9.9", index="", sha256="",
        repository="https://course.invalid/attention-from-scratch", distribution="attention-checks")


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


def test_the_setup_cell_keeps_pips_reason_whole_however_long_pips_lines(tmp_path, monkeypatch):
    """Offline where no name resolves (a runtime without network): the paragraph keeps the system's
    reason as pip gives it, e.g. "[Errno -2] Name or service not known", after a release URL as long
    as a fork's. (The cell run in this process: no kernel needed to read its message.)"""
    host = "checks.invalid"  # a name that never resolves (RFC 2606)
    try:
        socket.getaddrinfo(host, 80)
        pytest.skip(f"{host} resolves here: this resolver answers every name")
    except socket.gaierror as error:
        reason = error.strerror  # "Name or service not known", "Temporary failure in name resolution", ...
    url = f"https://{host}/a-teaching-assistants-fork/attention-from-scratch/releases/download/v9.9.9/" \
          "attention_checks-9.9.9-py3-none-any.whl"
    monkeypatch.chdir(tmp_path)  # no attention_checks above it: the cell installs
    with pytest.raises(ImportError) as failed:
        exec(compile(offline_setup_cell(url), "<setup cell>", "exec"), {})
    paragraph = str(failed.value)
    assert paragraph.startswith("Could not install the course's check helpers 9.9.9 with pip (")
    assert f"{reason})" in paragraph and host in paragraph, paragraph
    assert len(paragraph) < 1500, paragraph  # pip's lines shortened, not the whole of its output


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
