"""The versions the grader was written for: the private jupyter_client, nbconvert, nbclient
and ipykernel methods it overrides or calls must be there, taking what it passes, and so must the
private parts of PyTorch the checks read.

A renamed private method would not fail loudly: the override would simply never run (no
sandbox, no time limit, no sanitised feedback). So the installed versions must be in the
ranges of requirements.txt, and each method is checked here, by name, async-ness and
parameters. Checked against the lowest versions of the ranges (jupyter_client 8.0.3,
nbconvert 7.16.0, nbclient 0.10.0) and the installed ones.
"""
from __future__ import annotations

import inspect
import os
from importlib.metadata import version
from pathlib import Path

import nbformat
import pytest
from ipykernel.heartbeat import Heartbeat
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.provisioning import LocalProvisioner
from nbclient import NotebookClient
from nbclient.output_widget import OutputWidget
from nbconvert.exporters import Exporter, HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from nbconvert.preprocessors.sanitize import SanitizeHTML
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REQUIREMENTS = Path(__file__).resolve().parents[1] / "requirements.txt"
PINNED = ["jupyter_client", "nbconvert", "nbclient", "nbgrader", "nh3", "torch"]

# (class, method, the parameters the grader passes or receives, in order, whether it is async)
OVERRIDDEN = [
    # sandbox/provisioners.py: the kernel provisioner API (public) that starts the grader's kernels
    (LocalProvisioner, "pre_launch", [], True),
    (LocalProvisioner, "launch_kernel", ["cmd"], True),
    (LocalProvisioner, "cleanup", ["restart"], True),
    # sandbox/kernels.py: SandboxedKernelClient
    (AsyncKernelClient, "wait_for_ready", ["timeout"], True),
    (AsyncKernelClient, "_handle_kernel_info_reply", ["msg"], False),
    # sandbox/kernels.py: SandboxedExecute (nbgrader's Execute is an nbclient NotebookClient), ReadOnlyOutputWidget
    (NotebookClient, "output", ["outs", "msg", "display_id", "cell_index"], False),
    (NotebookClient, "on_comm_open_jupyter_widget", ["msg"], False),
    (OutputWidget, "sync_state", [], False),
    # exporters.py and feedback.py
    (Exporter, "_validate_preprocessor", ["nbc", "preprocessor"], False),
    (TemplateExporter, "_create_environment", [], False),
    (HTMLExporter, "_init_resources", ["resources"], False),
    (HTMLExporter, "markdown2html", ["context", "source"], False),
    (Highlight2HTML, "__call__", ["source", "language", "metadata"], False),
    (WidgetsDataTypeFilter, "__init__", ["notebook_metadata", "resources"], False),
    (SanitizeHTML, "sanitize_code_outputs", ["outputs"], False),
    (SanitizeHTML, "sanitize_html_tags", ["html_str"], False),
    # sandbox/forkserver.py: the heartbeat's thread confines itself once its socket is bound
    (Heartbeat, "_bind_socket", [], False),
]


def requirement(name: str) -> Requirement:
    lines = [line.split("#")[0].strip() for line in REQUIREMENTS.read_text().splitlines()]
    found = [Requirement(line) for line in lines if line and canonicalize_name(Requirement(line).name) ==
             canonicalize_name(name)]
    assert len(found) == 1, f"requirements.txt must pin {name} once, with a range"
    return found[0]


@pytest.mark.parametrize("name", PINNED)
def test_the_installed_version_is_in_the_range_the_grader_was_written_for(name):
    pinned, installed = requirement(name), version(name)
    assert pinned.specifier and any(s.operator == "<" for s in pinned.specifier), f"{pinned}: no upper bound"
    assert pinned.specifier.contains(installed, prereleases=True), (
        f"{name} {installed} is installed, but the grader overrides its private methods as of {pinned} "
        f"(requirements.txt): install a version in that range, or run tests/test_versions.py with the new "
        "version and update the overrides and the range")


@pytest.mark.parametrize("cls, method, parameters, is_async", OVERRIDDEN, ids=lambda x: getattr(x, "__name__", x))
def test_each_overridden_method_is_there_as_the_grader_expects(cls, method, parameters, is_async):
    where = f"{cls.__module__}.{cls.__name__}.{method}"
    assert hasattr(cls, method), f"{where} is gone: the grader's override of it would never run"
    function = getattr(cls, method)
    assert inspect.iscoroutinefunction(function) == is_async, f"{where}: async is now {not is_async}"
    found = [p for p in inspect.signature(function).parameters.values() if p.name != "self"]
    named = [p.name for p in found if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    assert named[:len(parameters)] == parameters, f"{where}: parameters {named}, the grader expects {parameters}"
    required = [p.name for p in found[len(parameters):] if p.default is p.empty and
                p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    assert not required, f"{where}: new required parameters {required}, which the grader does not pass"


def test_the_attributes_the_grader_reads_are_there():
    """Not methods, but read or replaced by the grader all the same."""
    exporter = HTMLExporter()
    assert isinstance(exporter._nb_metadata, dict)  # feedback.py: the widgets filter's metadata
    client = NotebookClient(nbformat.v4.new_notebook())
    client.reset_execution_trackers()
    assert "@jupyter-widgets/output" in client.widget_registry  # sandbox/kernels.py swaps the Output widget
    assert "timeout_func" in client.trait_names()  # sandbox/kernels.py: the notebook's deadline
    from nbconvert.filters.markdown_mistune import InvalidNotebook  # feedback.py: a lost attachment
    assert issubclass(InvalidNotebook, Exception)


def test_the_private_parts_of_pytorch_the_checks_read_are_there():
    """What the checks read of PyTorch's internals with a default: renamed, they would watch
    nothing and say nothing (a forbidden operator seen by its name, the private implementations'
    folders, the meta run's hooks)."""
    import torch
    from torch.utils import _pytree
    from torch.utils._python_dispatch import TorchDispatchMode

    from attention_checks.core import _PRIVATE_DIRS

    op = torch.ops.aten._softmax.default
    assert op._overloadpacket._qualified_op_name == "aten::_softmax"  # core.ForbiddenCalls: ops by name
    assert all(os.path.isdir(folder) for folder in _PRIVATE_DIRS), _PRIVATE_DIRS  # the private implementations
    assert callable(_pytree.tree_leaves) and isinstance(TorchDispatchMode, type)  # probe.py's meta run
    for name in ("_local_scalar_dense", "equal", "copy_", "_to_copy", "index", "lift_fresh"):
        assert hasattr(torch.ops.aten, name), name


def test_a_new_gradebook_is_the_one_nbgrader_makes(tmp_path, monkeypatch):
    """course.new_gradebook writes nbgrader's tables and schema revision itself (nbgrader asks a
    new alembic process for the revision: seconds per course); nbgrader's own Gradebook makes
    the same database, and opens ours as an existing one."""
    import sqlite3
    import sys

    from nbgrader.api import Gradebook

    from autograder.grading.course import new_gradebook

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")  # nbgrader runs `alembic`
    new_gradebook(tmp_path / "ours.db")
    Gradebook(f"sqlite:///{tmp_path / 'theirs.db'}").close()

    def contents(path):
        with sqlite3.connect(path) as db:
            return (sorted(db.execute("SELECT type, name, sql FROM sqlite_master")),
                    db.execute("SELECT version_num FROM alembic_version").fetchall())

    assert contents(tmp_path / "ours.db") == contents(tmp_path / "theirs.db")
    with Gradebook(f"sqlite:///{tmp_path / 'ours.db'}", "a-course") as gradebook:
        gradebook.add_student("ann")
        assert [s.id for s in gradebook.students] == ["ann"]
