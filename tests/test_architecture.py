"""The layout is the architecture: import-linter's contracts in pyproject.toml hold (the
kernel's side never imports the grader; the grader's wings, and the modules in each, are layers
without cycles)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", *args], cwd=cwd, capture_output=True, text=True)


def test_the_import_contracts_hold():
    done = lint()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout, done.stdout[-3000:]


def test_a_layer_that_imports_upwards_breaks_the_contract(tmp_path):
    """The check can fail: a copy of the packages in which the results import the runner."""
    for package in ("attention_checks", "autograder"):
        subprocess.run(["cp", "-r", str(REPO / package), str(tmp_path)], check=True)
    (tmp_path / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    results = tmp_path / "autograder" / "results.py"
    results.write_text(results.read_text() + "\nfrom autograder.engine import runner  # upwards\n")
    done = subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": str(tmp_path), "PATH": str(LINT_IMPORTS.parent)})
    assert done.returncode != 0 and "autograder.results -> autograder.engine.runner" in done.stdout, done.stdout[-3000:]


def test_a_circle_in_the_checks_breaks_the_contract(tmp_path):
    """The checks' layers are held too: a copy in which what a case is (cases) imports the
    registry that declares checks, closing a circle, fails the contract."""
    for package in ("attention_checks", "autograder"):
        subprocess.run(["cp", "-r", str(REPO / package), str(tmp_path)], check=True)
    (tmp_path / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    cases = tmp_path / "attention_checks" / "cases.py"
    cases.write_text(cases.read_text() + "\nfrom attention_checks import registry  # upwards\n")
    done = subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": str(tmp_path), "PATH": str(LINT_IMPORTS.parent)})
    assert done.returncode != 0 and "attention_checks.cases -> attention_checks.registry" in done.stdout, done.stdout[-3000:]


def test_grade_finds_the_class_and_starts_its_sandbox_before_loading_pytorch():
    """`grade` starts the sandbox its kernels are forked from (or its workers) before it loads
    nbgrader and PyTorch itself, so that both imports run at once: every module it needs until
    then must load neither."""
    modules = ["autograder.cli", "autograder.instructor.lms", "autograder.layout", "autograder.report",
               "autograder.submissions", "autograder.engine.process", "autograder.sandbox.bwrap",
               "autograder.sandbox.server"]
    code = f"import sys\nfor m in {modules!r}: __import__(m)\nprint(sorted(m for m in ('torch', 'nbgrader', 'jupyter_client') if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_kernels_record_for_the_grader():
    """sandbox/bwrap.py names the checks' recording switch rather than importing it (it must not
    load PyTorch): the two must stay the same name, or no kernel would record what the grader judges."""
    from attention_checks.record import RECORD_VARIABLE
    from autograder.sandbox.bwrap import KERNEL_ENVIRONMENT

    assert KERNEL_ENVIRONMENT[RECORD_VARIABLE] == "1"
