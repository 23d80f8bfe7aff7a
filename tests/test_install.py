"""The notebooks' setup cells install the check helpers from one setting (pyproject.toml).

What a Colab student's first cell does, in a fresh virtual environment (``fresh_venv``, ``kernel``)
with the wheel of the student distribution, is tested in tests/test_publish.py.
"""
from __future__ import annotations

import os
import shutil
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
