"""The notebooks' setup cells install the check helpers from one setting (pyproject.toml).

What a Colab student's first cell does, in a fresh virtual environment (``fresh_venv``, ``kernel``)
with the wheel of the student distribution, is tested in tests/test_publish.py.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path

import nbformat
import pytest

from autograder.grading import release

pytestmark = pytest.mark.slow  # runs kernels, the CLI, a server or a browser

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENT = "01-self-attention"  # the smallest; any assignment's setup cell installs the same way


def _notebook(folder: str, assignment: str = ASSIGNMENT) -> Path:
    return next((ROOT / folder / assignment).glob("*.ipynb"))


def _setup_cell(nb) -> nbformat.NotebookNode:
    return next(c for c in nb.cells if release._checks_imported(c))


def test_every_notebook_installs_the_release_that_pyproject_names():
    setting = release.read_setting()
    assert release.install_spec() == setting.requirement
    assert setting.requirement == (f"attention-checks @ {setting.release_url.rstrip('/')}/"
                                   f"attention_checks-{setting.version}-py3-none-any.whl")
    assert setting.release_url.startswith(setting.repository + "/releases/download/v" + setting.version)
    assert release.install_problems([ROOT / "solutions", ROOT / "exercises"]) == []


def test_the_colab_button_and_the_install_line_name_the_same_public_repository():
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["repository"]["url"].rstrip("/") == release.install_setting()[0]


def test_an_index_is_one_line_of_configuration_and_two_places_are_refused(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    text = (ROOT / "pyproject.toml").read_text()
    release_line = next(line for line in text.splitlines() if line.startswith("checks-release = "))
    pyproject.write_text(text.replace(release_line, 'checks-index = "https://index.example.org/simple/"'))
    setting = release.read_setting(pyproject)
    assert setting.requirement == f"attention-checks=={setting.version}"
    block = release.fallback(setting, sha256="ab" * 32)
    assert 'INDEX, SHA256 = "https://index.example.org/simple/", "' + "ab" * 32 + '"' in block
    pyproject.write_text(text.replace(release_line, release_line + '\nchecks-index = "https://index.example.org/simple/"'))
    with pytest.raises(SystemExit, match="sets both checks-release and checks-index: set exactly one"):
        release.read_setting(pyproject)


def test_a_disagreeing_notebook_is_reported_and_release_rewrites_only_its_setup_cell(tmp_path):
    source = tmp_path / "solutions"
    shutil.copytree(ROOT / "solutions" / ASSIGNMENT, source / ASSIGNMENT)
    path = next((source / ASSIGNMENT).glob("*.ipynb"))
    nb = nbformat.read(path, as_version=4)
    setup = _setup_cell(nb)
    setup.source = setup.source.replace(release.install_spec(), "git+https://github.com/someone/fork@main")
    nbformat.write(nb, path)
    assert release.install_problems([source]) == [
        f"{path}: the setup cell installs git+https://github.com/someone/fork@main, not "
        f"{release.install_spec()} as pyproject.toml says (or its fallback differs from release's)"]

    # Another version in the setting: every notebook disagrees until release rewrites it.
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text((ROOT / "pyproject.toml").read_text().replace('version = "', 'version = "9.', 1))
    assert "9." + release.read_setting().version in release.install_spec(pyproject)
    assert release.write_install_lines(source, [ASSIGNMENT], pyproject) == [path]
    assert release.install_problems([source], pyproject) == []
    rewritten = nbformat.read(path, as_version=4)
    original = nbformat.read(_notebook("solutions"), as_version=4)
    assert f'CHECKS, VERSION = "{release.install_spec(pyproject)}", "9.' in _setup_cell(rewritten).source
    assert [c for c in rewritten.cells if c is not _setup_cell(rewritten)] == \
        [c for c in original.cells if c is not _setup_cell(original)]
    assert release.write_install_lines(source, [ASSIGNMENT], pyproject) == []  # nothing left to do

    # A notebook that imports the checks with no fallback is reported, not silently skipped.
    setup = _setup_cell(rewritten)
    setup.source = "from attention_checks.core import pick_device\n"
    nbformat.write(rewritten, path)
    assert "has no `except ImportError:` fallback" in release.install_problems([source])[0]
    with pytest.raises(SystemExit, match="no `except ImportError:` fallback"):
        release.write_install_lines(source, [ASSIGNMENT])


def test_release_runs_without_bubblewrap(tmp_path):
    """Release runs no student code: it must not ask for the sandbox (issue 13)."""
    bin_dir = tmp_path / "bin"  # a PATH with this Python's tools and nothing else: no bwrap, no prlimit
    bin_dir.mkdir()
    for tool in Path(sys.executable).parent.iterdir():
        (bin_dir / tool.name).symlink_to(tool)
    assert shutil.which("bwrap", path=str(bin_dir)) is None
    shutil.copytree(ROOT / "solutions" / ASSIGNMENT, tmp_path / "src" / ASSIGNMENT)
    run = subprocess.run([sys.executable, "-m", "autograder", "release", ASSIGNMENT, "--source", tmp_path / "src",
                          "--dest", tmp_path / "out"], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PATH": str(bin_dir)})
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "out" / ASSIGNMENT / _notebook("exercises").name).is_file()


# --------------------------------------------------------------------------
# a fresh environment, as on Colab (tests/test_publish.py runs the setup cell there)


def fresh_venv(tmp_path: Path) -> Path:
    """A virtual environment without the course's package that reuses this one's torch, Jupyter and
    pip (no download): a .pth names a folder of links to this site-packages, minus the course."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    shared = tmp_path / "shared-site-packages"
    shared.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        # The editable install of this clone (a .pth and its finder) and its metadata stay out.
        if entry.suffix != ".pth" and not entry.name.startswith(("__editable__", "attention_from_scratch")):
            (shared / entry.name).symlink_to(entry)
    python = venv / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "shared.pth").write_text(f"{shared}\n")
    return python


def kernel(tmp_path: Path, python: Path, monkeypatch) -> str:
    """A Jupyter kernelspec that starts ``python``'s ipykernel; returns its name."""
    spec = tmp_path / "jupyter" / "kernels" / "fresh"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        f'{{"argv": ["{python}", "-m", "ipykernel_launcher", "-f", "{{connection_file}}"], '
        f'"display_name": "fresh", "language": "python"}}')
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.delenv("PYTHONPATH", raising=False)  # the kernel must not see this clone
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # offline: pip must find everything where it is told
    return "fresh"


# --------------------------------------------------------------------------
# Colab's ipywidgets


COLAB_WIDGETS = ["ipywidgets==7.7.1", "widgetsnbextension==3.6.*", "ipython_genutils==0.2.0", "jupyterlab_widgets==1.1.*"]


def test_widget_cells_run_with_colabs_ipywidgets_7(tmp_path):
    """The opt-in check of tests/test_checks_softmax_scaling.py (the widget cells in a kernel with
    ipywidgets 7.7.1, as on Colab), run here with the packages it needs: about half a minute."""
    target = tmp_path / "ipywidgets7"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", target,
                          *COLAB_WIDGETS], capture_output=True, text=True)
    if pip.returncode and not os.environ.get("CI"):  # offline on a laptop; in CI it must work
        pytest.skip(f"cannot install ipywidgets 7.7.1: {pip.stderr.strip()[-300:]}")
    assert pip.returncode == 0, pip.stderr
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "tests/test_checks_softmax_scaling.py", "-k", "widget_cells_run_headless and 7.7.1"],
                         cwd=ROOT, capture_output=True, text=True, env={**os.environ, "IPYWIDGETS7_PATH": str(target)})
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout[-3000:] + run.stderr[-2000:]


# --------------------------------------------------------------------------
# the student distribution's `make lab`


def student_distribution(tmp_path: Path) -> Path:
    """The student distribution's Makefile and the files it includes, in ``tmp_path``, with a
    .venv whose python and jupyter are this environment's (installed: its stamp is the newest)."""
    shutil.copy(ROOT / "autograder" / "instructor" / "student" / "Makefile", tmp_path)
    for name in ("requirements.txt", "pyproject.toml"):
        shutil.copy(ROOT / "autograder" / "instructor" / "student" / name, tmp_path)
    (tmp_path / "tools").mkdir()
    for name in ("venv.mk", "system-packages.sh", "web_assets.py"):
        shutil.copy(ROOT / "tools" / name, tmp_path / "tools")
    (tmp_path / "exercises").mkdir()
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for tool in ("python", "jupyter"):  # scripts, not links: a link would lose this venv's packages
        (bin_dir / tool).write_text(f'#!/bin/sh\nexec "{Path(sys.executable).parent / tool}" "$@"\n')
        (bin_dir / tool).chmod(0o755)
    (tmp_path / ".venv" / ".installed").touch()
    return tmp_path


def test_make_lab_starts_jupyterlab_as_root_too(tmp_path):
    """JupyterLab refuses root without --allow-root: `make lab` says it where it runs as root (a
    container, a lab server), and only there. The real server is started, then stopped."""
    folder = student_distribution(tmp_path)
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    lab = subprocess.Popen(["make", "lab", "LAB_ARGS=--no-browser --port=0"], cwd=folder, env=env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    said = []
    try:
        for line in lab.stdout:  # until the server says where it runs, or exits
            said.append(line)
            if "is running at" in line:
                break
    finally:
        os.killpg(lab.pid, signal.SIGTERM)
        lab.wait(timeout=30)
    command = said[0]
    assert command.startswith(".venv/bin/jupyter lab exercises/"), said
    assert ("--allow-root" in command) == (os.geteuid() == 0), command
    assert any("is running at" in line for line in said), "".join(said[-20:])


def test_make_checks_that_pytorch_is_the_cpu_build_asked_for(tmp_path):
    """The student distribution asks for PyTorch's CPU build; pip also reads this machine's pip
    configuration, which may offer a CUDA build: the install checks the build it got (this
    environment's torch is the CPU build; a CUDA build is a stand-in module with torch's version
    attributes), and stops with what to do."""
    folder = student_distribution(tmp_path)
    recipe = subprocess.run(["make", "-n", "-B", ".venv/.installed"], cwd=folder, capture_output=True, text=True).stdout
    steps = recipe.splitlines()
    check = steps.index('.venv/bin/python -c "$TORCH_CPU_CHECK"')
    assert "torch-wheel/*.whl" in steps[check - 2] and steps[-1] == "touch .venv/.installed", recipe

    cpu = subprocess.run(["make", "check-torch"], cwd=folder, capture_output=True, text=True)
    assert cpu.returncode == 0 and "the CPU build, as asked" in cpu.stdout, cpu.stdout + cpu.stderr

    cuda = tmp_path / "cuda-build" / "torch"
    cuda.mkdir(parents=True)
    (cuda / "__init__.py").write_text('__version__ = "2.5.1+cu124"\nclass version:\n    cuda, hip = "12.4", None\n')
    wrong = subprocess.run(["make", "check-torch"], cwd=folder, capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(cuda.parent)})
    assert wrong.returncode != 0
    assert ("PyTorch's CPU build was asked for (TORCH_INDEX=https://download.pytorch.org/whl/cpu), but pip "
            "installed torch 2.5.1+cu124, built for CUDA 12.4") in wrong.stderr, wrong.stderr
    assert "TORCH=torch==2.5.1+cpu" in wrong.stderr and "pip config list" in wrong.stderr

    gpu = subprocess.run(["make", "check-torch", "TORCH_INDEX="], cwd=folder, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(cuda.parent)})
    assert gpu.returncode == 0 and "no particular build" in gpu.stdout  # a GPU build asked for: nothing to check
