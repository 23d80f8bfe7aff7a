"""Regenerate the student notebooks (exercises/) from the source notebooks (solutions/), and
compute the answers of their visible cases as data (``write_visible_answers``).

First the install line of every setup cell is written from the one setting in
pyproject.toml (see ``read_setting``), then nbgrader's generate_assignment does the
rest: solution regions become ``raise NotImplementedError()``, hidden tests are
removed, outputs cleared and checksums recorded. The result is committed, and a test
checks it is up to date. Release runs no student code, so it needs no sandbox.
"""
from __future__ import annotations

import builtins
import filecmp
import re
import shutil
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nbformat

from autograder.cells import is_test_cell
from autograder.grading.course import Course
from autograder.layout import EXERCISES_DIR, REPO_ROOT, SOLUTIONS_DIR, find_assignments
from autograder.options import GradingOptions

if TYPE_CHECKING:  # attention_checks, and PyTorch with it, are imported where the check calls are read:
    from attention_checks import registry  # `grade`'s own process never loads them (its workers do)

PYPROJECT = REPO_ROOT / "pyproject.toml"

# The setup cell's fallback when ``attention_checks`` cannot be imported: the body of its
# ``except ImportError:``, up to the line that imports the checks again. Release writes it
# into every notebook, so that all of them install the checks the same way: exactly the
# configured version of the wheel, from the one configured place, its sha256 checked by pip
# where the notebook names one (`python -m autograder publish` pins it in the students' edition).
FALLBACK = """\
# In a clone of the course the check helpers are in a parent folder; elsewhere (Colab)
# they are installed from the course's release (`python -m autograder release` writes
# CHECKS from pyproject.toml).
import importlib, importlib.metadata, re, subprocess, sys, tempfile
from pathlib import Path
root = next((p for p in [Path.cwd(), *Path.cwd().parents] if (p / "attention_checks").is_dir()), None)
if root is not None:
    sys.path.insert(0, str(root))
else:
    CHECKS, VERSION = "{requirement}", "{version}"
    INDEX, SHA256 = "{index}", "{sha256}"  # SHA256: the wheel's, checked by pip ("": the version only)
    pinned = Path(tempfile.mkdtemp()) / "checks.txt"
    pinned.write_text(CHECKS + (f" --hash=sha256:{{SHA256}}" if SHA256 else "") + "\\n")
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-color", "--no-deps",
                          "--retries", "0", "--timeout", "2",  # offline: fail in seconds, not a minute
                          *(["--index-url", INDEX] if INDEX else []), "-r", str(pinned)],
                         capture_output=True, text=True)
    if pip.returncode != 0:  # without colours, the boxes before a line, or the hints
        said = [re.sub(r"^[^\\w\\[(]+", "", line) for line in re.sub(r"\\x1b\\[[0-9;]*m", "", pip.stderr).splitlines()
                if line.strip() and not line.startswith("hint:")]  # "ERROR: ...", pip's own words
        why = said[-1:] if "Traceback" in pip.stderr else said[:3]  # a crash: its last line
        # and the line that says why, whole: the system's reason ("[Errno -2] Name or service not known")
        why += [line for line in said if "[Errno" in line and line not in why][-1:]
        # a long line (a URL, a reason wrapped in exceptions) keeps its start and its end, where the reason is
        why = " ".join(line if len(line) <= 200 else line[:80] + " ... " + line[-115:] for line in why) or "no message"
        failed = ImportError(
            f"Could not install the course's check helpers {{VERSION}} with pip ({{why}}). "
            "The tests in this notebook need them. If this runtime is offline, connect it and run "
            "this cell again. If the notebook comes from a fork or another copy of the course, that "
            "release may not exist: ask your instructor for the notebook's current version, or work "
            "in a clone of the course: `git clone {repository}`, "
            "then `pip install -r requirements.txt` in it, and open this notebook from its "
            "exercises/ folder, where the checks are found without installing.")
        failed._render_traceback_ = lambda: [f"ImportError: {{failed}}"]  # Jupyter shows this paragraph alone

        def explain_missing_names(shell, etype, value, tb, tb_offset=None):  # a test cell run after this one
            if "attention_checks" not in sys.modules:  # else installed since: a name of the student's own
                shown = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
                value._render_traceback_ = lambda: shown + [
                    "The setup cell at the top of this notebook could not install the checks, so the "
                    "tests' names are missing: run the setup cell again once it can (its message says why)."]
            shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        try:
            get_ipython().set_custom_exc((NameError,), explain_missing_names)
        except NameError:  # not in IPython
            pass
        raise failed from None
    importlib.invalidate_caches()
    installed = importlib.metadata.version("{distribution}")
    if installed != VERSION:
        raise ImportError(f"pip left version {{installed}} of the check helpers, not {{VERSION}}: "
                          "restart the runtime and run this cell again.")
importlib.invalidate_caches()
"""

_EXCEPT = re.compile(r"^(?P<indent>[ \t]*)except ImportError:[ \t]*$")
DISTRIBUTION = "attention-checks"  # the package of the checks students install (publish builds its wheel)


@dataclass(frozen=True)
class InstallSetting:
    """Where every setup cell installs the checks from: ``[tool.attention-from-scratch]`` of
    pyproject.toml (one of ``checks-release``, ``checks-index``) and ``[project] version``."""

    repository: str  # the public student repository (`student-repository`)
    version: str
    release_url: str = ""  # a folder URL holding the wheel (a release's assets), {version} filled in
    index: str = ""  # or a package index that has the wheel

    @property
    def tag(self) -> str:
        return f"v{self.version}"

    @property
    def wheel(self) -> str:
        return f"{DISTRIBUTION.replace('-', '_')}-{self.version}-py3-none-any.whl"

    @property
    def requirement(self) -> str:
        """What pip installs: the wheel at its URL, or the exact version from the index."""
        if self.release_url:
            return f"{DISTRIBUTION} @ {self.release_url.rstrip('/')}/{self.wheel}"
        return f"{DISTRIBUTION}=={self.version}"


def read_setting(pyproject: Path = PYPROJECT) -> InstallSetting:
    config = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    ours, version = config["tool"]["attention-from-scratch"], config["project"]["version"]
    places = [key for key in ("checks-release", "checks-index") if ours.get(key)]
    if len(places) != 1:
        what = "both checks-release and checks-index" if places else "neither checks-release nor checks-index"
        raise SystemExit(f"{pyproject}: [tool.attention-from-scratch] sets {what}: set exactly one "
                         "(where the setup cells install the checks from)")
    return InstallSetting(ours["student-repository"].rstrip("/"), version,
                          release_url=ours.get("checks-release", "").replace("{version}", version),
                          index=ours.get("checks-index", ""))


def install_setting(pyproject: Path = PYPROJECT) -> tuple[str, str]:
    """(public student repository URL, release tag ``v<project.version>``) from pyproject.toml."""
    setting = read_setting(pyproject)
    return setting.repository, setting.tag


def install_spec(pyproject: Path = PYPROJECT) -> str:
    """What the setup cells ``pip install``: the configured wheel of the checks, that exact version."""
    return read_setting(pyproject).requirement


def fallback(setting: InstallSetting, sha256: str = "") -> str:
    return FALLBACK.format(requirement=setting.requirement, version=setting.version, index=setting.index,
                           sha256=sha256, repository=setting.repository, distribution=DISTRIBUTION)


def _fallback_span(lines: list[str]) -> tuple[int, int, str] | None:
    """(first, end, indent) of the fallback block in a cell's lines, or None: the lines after an
    ``except ImportError:`` whose ``try`` imports attention_checks, up to the re-import."""
    for i, line in enumerate(lines):
        match = _EXCEPT.match(line)
        if not match or not any("attention_checks" in before for before in lines[:i]):
            continue
        body = match["indent"] + "    "
        for j in range(i + 1, len(lines)):
            if re.match(rf"{re.escape(body)}(from|import) attention_checks\b", lines[j]):
                return i + 1, j, body
    return None


def with_install_line(source: str, setting: InstallSetting, sha256: str = "") -> str | None:
    """``source`` (a setup cell) with its fallback rewritten; None when it has none."""
    lines = source.split("\n")
    span = _fallback_span(lines)
    if span is None:
        return None
    first, end, indent = span
    block = [indent + line if line else "" for line in fallback(setting, sha256).rstrip("\n").split("\n")]
    return "\n".join(lines[:first] + block + lines[end:])


def _checks_imported(cell) -> bool:
    return cell.cell_type == "code" and re.search(r"^\s*(from|import) attention_checks\b", cell.source, re.M)


def install_problems(folders: list[Path], pyproject: Path = PYPROJECT, sha256: str = "") -> list[str]:
    """A line for each notebook under ``folders/<assignment>/`` whose setup cell does not
    install the checks exactly as the setting in pyproject.toml says, with the wheel's
    ``sha256`` where given (empty when all do)."""
    setting = read_setting(pyproject)
    problems = []
    for notebook in sorted(p for folder in folders for p in Path(folder).glob("*/*.ipynb")):
        nb = nbformat.read(notebook, as_version=4)
        cells = [c for c in nb.cells if _checks_imported(c)]
        if not cells:
            continue
        first = cells[0]
        wanted = with_install_line(first.source, setting, sha256)
        if wanted is None:
            problems.append(f"{notebook}: the first cell that imports attention_checks has no "
                            f"`except ImportError:` fallback that installs {setting.requirement}")
        elif wanted != first.source:
            found = re.search(r'CHECKS(?:, VERSION)? = "([^"]*)"|(git\+\S+?)["\s]', first.source)
            problems.append(f"{notebook}: the setup cell installs "
                            f"{(found and (found[1] or found[2])) or 'something else'}, not {setting.requirement} "
                            f"as pyproject.toml says (or its fallback differs from release's)")
    return problems


def write_install_lines(source_dir: Path, assignments: list[str], pyproject: Path = PYPROJECT,
                        sha256: str = "") -> list[Path]:
    """Rewrite the setup cells of ``source_dir/<assignment>/*.ipynb`` that disagree with the
    setting (and pin the wheel's ``sha256`` where given); returns the notebooks changed. Only
    that cell changes."""
    setting = read_setting(pyproject)
    changed = []
    for assignment in assignments:
        for path in sorted((source_dir / assignment).glob("*.ipynb")):
            nb = nbformat.read(path, as_version=4)
            cell = next((c for c in nb.cells if _checks_imported(c)), None)
            wanted = cell and with_install_line(cell.source, setting, sha256)
            if wanted is None:
                if cell is not None:
                    raise SystemExit(f"{path}: its first cell that imports attention_checks has no "
                                     "`except ImportError:` fallback to write the install line into; copy "
                                     "the setup cell of another assignment")
                continue
            if wanted != cell.source:
                cell.source = wanted
                nbformat.write(nb, path)
                changed.append(path)
    return changed


def generate(source_dir: Path, dest_dir: Path, assignments: list[str] | None = None,
             write_install: bool = True) -> list[str]:
    """Write ``dest_dir/<assignment>/`` for each assignment; returns the assignments written.
    ``write_install``: first bring the source notebooks' install lines up to date."""
    known = find_assignments(source_dir)
    chosen = assignments or known
    unknown = sorted(set(chosen) - set(known))
    if unknown:
        raise SystemExit(f"unknown assignment(s): {', '.join(unknown)}; known: {', '.join(known)}")
    if write_install:
        write_install_lines(source_dir, chosen)
    with tempfile.TemporaryDirectory(prefix="autograder-release-") as tmp:
        course = Course(Path(tmp), GradingOptions(source_dir, sandbox=False))  # runs no student code: no bwrap needed
        for assignment in chosen:
            released = course.generate(assignment)
            target = dest_dir / assignment
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(released, target)
    return chosen


def stale_files(source_dir: Path = SOLUTIONS_DIR, exercises_dir: Path = EXERCISES_DIR) -> list[str]:
    """Paths under exercises/ that differ from a fresh release (empty when up to date)."""
    with tempfile.TemporaryDirectory(prefix="autograder-release-check-") as tmp:
        fresh = Path(tmp)
        generate(source_dir, fresh, write_install=False)
        return sorted(_differences(filecmp.dircmp(fresh, exercises_dir), Path()))


def _differences(cmp: filecmp.dircmp, prefix: Path):
    for name in cmp.left_only + cmp.right_only + cmp.diff_files + cmp.funny_files:
        yield str(prefix / name)
    for name, sub in cmp.subdirs.items():
        yield from _differences(sub, prefix / name)


# --------------------------------------------------------------------------
# the check calls of test cells, and the visible cases' answers as data

HIDDEN_TESTS = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.S)


@dataclass(frozen=True)
class CheckCall:
    """One call of a declared check in a test cell: which check, on which cases, for how many points."""

    check: registry.Check
    cases: tuple[dict, ...]
    points: float


class _Recorder:
    """What a check's name means while a test cell's code is run to find its calls."""

    def __init__(self, check: registry.Check, calls: list[CheckCall]):
        self.check, self.calls = check, calls

    def __call__(self, student: Any, *, points: float, cases, device: Any = None) -> None:
        self.calls.append(CheckCall(self.check, tuple(dict(case) for case in cases), float(points)))


def check_calls(source: str) -> list[CheckCall]:
    """The check calls of a test cell's code (the course's own), found by running it with every
    check recording its arguments instead of running; every other name is the student's."""
    from attention_checks import registry
    from autograder.grading.judge import run_test_source

    calls: list[CheckCall] = []
    shared = {"__builtins__": builtins, **{name: _Recorder(check, calls) for name, check in registry.load_all().items()}}
    run_test_source(source, shared)
    return calls


def _test_cells(folder: Path):
    for path in sorted(Path(folder).glob("*.ipynb")):
        yield from (cell for cell in nbformat.read(path, as_version=4).cells if is_test_cell(cell))


def visible_calls(exercises_dir: Path, assignment: str) -> list[CheckCall]:
    """The check calls of the test cells of a released assignment: what students see and run."""
    return [call for cell in _test_cells(exercises_dir / assignment) for call in check_calls(cell.source)]


def hidden_calls(source_dir: Path, assignment: str) -> list[CheckCall]:
    """The check calls of the hidden tests of a source assignment: what only the grader runs."""
    return [call for cell in _test_cells(source_dir / assignment) if HIDDEN_TESTS.search(cell.source)
            for call in check_calls("\n".join(HIDDEN_TESTS.findall(cell.source)))]


def visible_answers(calls: list[CheckCall]) -> list[dict[str, Any]]:
    """Each case of ``calls`` once, as ``published.write`` takes it: its expected outputs and its
    known mistakes (hint, outputs, and for a mistake recognised by a test on the student's outputs,
    that test: answers.fits's name and its arguments), computed by the references."""
    from attention_checks.answers.judging import REFERENCES, case_key, judged

    found: dict[tuple[str, str], dict[str, Any]] = {}
    for call in calls:
        for case in call.cases:
            key = (call.check.name, case_key(case))
            if key not in found:
                built = judged(call.check, case, REFERENCES)
                mistakes = [dict(hint=m.hint, outputs=m.outputs, fits=m.fits)
                            for m in REFERENCES.mistakes(call.check, built)]
                found[key] = dict(check=call.check.name, case=key[1], expected=built.expected, mistakes=mistakes,
                                  structure_share=REFERENCES.structure_share(call.check, key[1]))
    return list(found.values())


def write_visible_answers(exercises_dir: Path, folder: Path, assignments: list[str]) -> list[Path]:
    """Write ``folder/<assignment>.json`` and ``.pt`` (see ``attention_checks.published``) for the
    visible cases of each released assignment under ``exercises_dir``; returns the files written."""
    from attention_checks import published

    return [path for assignment in assignments
            for path in published.write(assignment, visible_answers(visible_calls(exercises_dir, assignment)), folder)]
