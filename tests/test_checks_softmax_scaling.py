"""Fast in-process tests of attention_checks.softmax_scaling, driven by the 02-softmax-scaling source notebook.

The last tests run the notebook's widget cells in a real kernel (a few seconds each): with the
installed ipywidgets (8 here), and with ipywidgets 7.7.1 (Colab's) when IPYWIDGETS7_PATH names
a folder that holds it, made with
    pip install --no-deps --target DIR ipywidgets==7.7.1 "widgetsnbextension==3.6.*" \
        ipython_genutils==0.2.0 "jupyterlab_widgets==1.1.*"
"""
from __future__ import annotations

import math
import os

import nbformat
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention_checks import CheckFailed
from attention_checks.core import ForbiddenCalls
from attention_checks.answers.judging import judged
from attention_checks.softmax_scaling import (
    FORBIDDEN_SOFTMAX,
    _some_masked,
    check_dot_product_variance,
    check_scaled_scores,
    check_score_scale,
    check_softmax,
)
from classroom.notebook import SourceNotebook, check_report, load_corpus
from classroom.notebook import tf32 as _tf32

ASSIGNMENT = "02-softmax-scaling"
NB = SourceNotebook(ASSIGNMENT)
CPU = torch.device("cpu")
FUNCTIONS = {"softmax": check_softmax, "scaled_scores": check_scaled_scores,
             "dot_product_variance": check_dot_product_variance, "score_scale": check_score_scale}
WIDGET_CELLS = ["widget_variance", "widget_width"]


# --------------------------------------------------------------------------
# the notebook's structure


def test_hidden_tests_cover_the_edge_cases():
    def hidden_cases(function):
        return [c for gid in NB.hidden() if f"check_{function}(" in NB.cells[gid].source for c in NB.cases(gid)]

    soft = hidden_cases("softmax")
    assert {len(c.get("shape", (2, 5))) for c in soft} >= {1, 2, 3, 4}
    assert {c.get("dim", -1) for c in soft} >= {-1, 0, 1, 2}
    assert any(c.get("shape", (2, 5))[0] == 1 for c in soft)
    for cases in (soft, hidden_cases("scaled_scores"), hidden_cases("dot_product_variance")):
        assert any(c.get("dtype") == "float64" for c in cases) and any("seed" in c for c in cases)
    assert any(c.get("dtype") == "float64" and (c.get("shift") or c.get("std", 1) >= 1e4) for c in soft)
    assert any(c.get("dtype") == "float64" and c.get("neg_inf") for c in soft)
    scores = hidden_cases("scaled_scores")
    assert any(c.get("batch") == (1,) for c in scores) and any(c.get("L") == 1 for c in scores)
    assert any(c.get("L", 5) < (c.get("S") or 5) for c in scores) and any(c.get("L", 5) > (c.get("S") or 5) for c in scores)


# --------------------------------------------------------------------------
# the corpus of simulated students


CORPUS = load_corpus(ASSIGNMENT)


# --------------------------------------------------------------------------
# the cases and the known mistakes


@pytest.mark.parametrize("function", FUNCTIONS)
def test_every_known_mistake_fails_a_visible_case(function):
    assert NB.uncaught_mistakes(FUNCTIONS[function]) == set()


def _grab(spec: dict) -> tuple[tuple, dict]:
    """The arguments a softmax case passes to the student's function."""
    x = check_softmax.build(spec)
    return tuple(x.args.values()), x.kwargs


def test_softmax_inputs():
    state = torch.random.get_rng_state()
    (a,), _ = _grab(dict(neg_inf=True, shape=(6, 2, 4), dim=0))
    (b,), kwargs = _grab(dict(neg_inf=True, shape=(6, 2, 4), dim=0))
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(a, b) and kwargs == {"dim": 0}
    masked = a.isneginf()
    assert masked.any() and (~masked).any(0).all() and masked.any(0).all()  # never a whole slice along dim
    for shape in [(5, 2), (3, 4, 7), (2, 2, 1, 3), (4, 1)]:
        mask = _some_masked(shape, torch.Generator().manual_seed(0))
        assert (~mask).any(-1).all() and (mask.any(-1).all() or shape[-1] == 1)
    (big,), _ = _grab(dict(shift=1e4))
    assert (big > 9990).all() and big.dtype == torch.float32
    (spread,), _ = _grab(dict(std=1e4, dtype="float64"))
    assert spread.abs().max() > 1e3 and spread.dtype == torch.float64
    for spec in (dict(shift=1e4), dict(shift=-1e4), dict(std=1e4), dict(neg_inf=True, std=1e4)):
        expected = judged(check_softmax, spec).expected["softmax"]
        assert expected.isfinite().all() and torch.allclose(expected.sum(-1), torch.ones(2, dtype=torch.float64))


def test_overflowing_softmax_is_diagnosed():
    def naive(x, dim=-1):
        e = x.exp()
        return e / e.sum(dim, keepdim=True)

    score, report = check_report(check_softmax, naive, [dict(), dict(shift=1e4), dict(std=1e4, dtype="float64")],
                            device=CPU)
    assert 0 < score < 1 and "NaN/inf where the reference has none" in report
    assert "subtract the maximum along `dim`" in report, report


def test_inputs_modified_in_place_do_not_confuse_the_diagnosis():
    def exp_in_place(x, dim=-1):
        x.exp_()  # the caller's tensor changes
        return x / x.sum(dim, keepdim=True)

    _, report = check_report(check_softmax, exp_in_place, [dict(shift=1e4)], device=CPU)
    assert "overflows or underflows" in report, report


# --------------------------------------------------------------------------
# the forbidden API


def _reference_softmax():
    return NB.student()["softmax"]


ROUTES = {  # how a student could reach PyTorch's softmax: an expression of x and d (the dim)
    "torch.softmax": "torch.softmax(x, d)",
    "Tensor.softmax": "x.softmax(d)",
    "Tensor.softmax unbound": "torch.Tensor.softmax(x, d)",
    "F.softmax": "F.softmax(x, dim=d)",
    "getattr": 'getattr(torch, "softmax")(x, d)',
    "nn.Softmax": "torch.nn.Softmax(dim=d)(x)",
    "F.log_softmax": "F.log_softmax(x, dim=d).exp()",
    "Tensor.log_softmax": "x.log_softmax(d).exp()",
    "torch.log_softmax": "torch.log_softmax(x, d).exp()",
    "nn.LogSoftmax": "torch.nn.LogSoftmax(dim=d)(x).exp()",
    "F.softmin": "F.softmin(-x, dim=d)",
    "nn.Softmin": "torch.nn.Softmin(dim=d)(-x)",
    "torch.special.softmax": "torch.special.softmax(x, d)",
    "torch.special.log_softmax": "torch.special.log_softmax(x, d).exp()",
    "torch._softmax": "torch._softmax(x, d, False)",
    "torch._log_softmax": "torch._log_softmax(x, d, False).exp()",
    "aten._softmax packet": "torch.ops.aten._softmax(x, d, False)",
    "aten._softmax overload": "torch.ops.aten._softmax.default(x, d, False)",
    "aten.softmax.int": "torch.ops.aten.softmax.int(x, d)",
    "aten._log_softmax": "torch.ops.aten._log_softmax.default(x, d, False).exp()",
    "aten.special_softmax": "torch.ops.aten.special_softmax(x, d)",
    "torch.sparse.softmax": "torch.sparse.softmax(x.to_sparse(), d).to_dense()",
    "torch.masked.softmax": "torch.masked.softmax(x, d)",
    "Categorical.probs": "torch.distributions.Categorical(logits=x.movedim(d, -1)).probs.movedim(-1, d)",
}
NOT_IN_SOURCE = {"Categorical.probs"}  # only the kernel's detector sees these


def _route(name: str):
    return eval(f"lambda x, d: {ROUTES[name]}", {"torch": torch, "F": F})  # noqa: S307 - the test's own code


@pytest.mark.parametrize("swallowed", [False, True], ids=["used", "swallowed"])
@pytest.mark.parametrize("route", ROUTES)
def test_forbidden_api_is_caught_however_it_is_called(route, swallowed):
    reference, call = _reference_softmax(), _route(route)

    def cheat(x, dim=-1):
        try:
            fast = call(x, dim)
            if swallowed:
                raise RuntimeError("hide it")
            return fast
        except RuntimeError:
            return reference(x, dim)

    assert torch.allclose(call(torch.tensor([[1.0, 2.0, 3.0]]), -1), torch.tensor([[1.0, 2.0, 3.0]]).softmax(-1))
    with pytest.raises(CheckFailed, match="softmax calls .*earns no points"):
        check_softmax(cheat, points=2, cases=[dict(), dict(shape=(3, 4), dim=0)], device=CPU)


@pytest.mark.parametrize("route", sorted(set(ROUTES) - NOT_IN_SOURCE))
def test_the_graders_source_scan_finds_the_forbidden_api(route):
    """The grader also reads the student's source: every display name must end with the identifier
    a student would write, as autograder.grading.scanner.SourceScanner matches on that."""
    from autograder.grading.judge import SourceScanner, StudentObject

    names = sorted(set(FORBIDDEN_SOFTMAX.values()))
    cell = f"def helper(x, d):\n    return {ROUTES[route]}\n\n\ndef softmax(x, dim=-1):\n    return helper(x, dim)\n"
    assert SourceScanner([cell]).uses(StudentObject("softmax"), names), route
    alias = "from torch.nn.functional import log_softmax as stable\n\n\ndef softmax(x, dim=-1):\n    return stable(x, dim).exp()\n"
    assert SourceScanner([alias]).uses(StudentObject("softmax"), names) == ["torch.log_softmax"]


def test_the_graders_source_scan_accepts_the_corpus():
    from autograder.grading.judge import SourceScanner, StudentObject

    names = sorted(set(FORBIDDEN_SOFTMAX.values()))
    for entry in CORPUS:
        cells = [entry.cells.get(gid, source) for gid, source in NB.solutions.items()]
        found = SourceScanner(cells).uses(StudentObject("softmax"), names)
        assert bool(found) == (entry.name == "softmax_calls_log_softmax"), (entry.name, found)
    assert all(name.rsplit(".", 1)[-1].isidentifier() for name in names)


def test_forbidden_detector_ignores_other_calls():
    with ForbiddenCalls(FORBIDDEN_SOFTMAX) as guard:
        x = torch.randn(3, 4)
        e = (x - x.amax(-1, keepdim=True)).exp()
        e / e.sum(-1, keepdim=True)
        torch.logsumexp(x, -1)
        torch.max(x, dim=0).values
        F.scaled_dot_product_attention(x[None], x[None], x[None])
        torch.nn.functional.gelu(x)
    assert guard.seen == []


def test_forbidden_calls_elsewhere_are_fine():
    """Only softmax is checked for softmax calls: the other functions may use it."""
    def variance_with_softmax(q, k):
        torch.softmax(q, -1)
        return torch.var((q * k).sum(-1))

    assert check_report(check_dot_product_variance, variance_with_softmax, [dict()], device=CPU)[0] == 1


# --------------------------------------------------------------------------
# numbers, tolerances, dtypes


@pytest.mark.parametrize("answer, points", [
    (lambda d_k, var_q=1.0, var_k=1.0: 1 / math.sqrt(d_k * var_q * var_k), 1),
    (lambda d_k, var_q=1.0, var_k=1.0: np.float64(d_k * var_q * var_k) ** -0.5, 1),
    (lambda d_k, var_q=1.0, var_k=1.0: torch.tensor(d_k * var_q * var_k).rsqrt(), 1),  # read as a float
    (lambda d_k, var_q=1.0, var_k=1.0: 0.1250001 if d_k == 64 else (d_k * var_q * var_k) ** -0.5, 1),
    (lambda d_k, var_q=1.0, var_k=1.0: 0.12502 if d_k == 64 else (d_k * var_q * var_k) ** -0.5, 0.5),
    (lambda d_k, var_q=1.0, var_k=1.0: str(1 / math.sqrt(d_k * var_q * var_k)), 0),
    (lambda d_k, var_q=1.0, var_k=1.0: None, 0),
    (lambda d_k, var_q=1.0, var_k=1.0: True, 0),
    (lambda d_k, var_q=1.0, var_k=1.0: torch.ones(2), 0),
])
def test_score_scale_takes_numbers(answer, points):
    score, report = check_report(check_score_scale, answer, [dict(d_k=64), dict(d_k=8, var_q=2.0, var_k=3.0)])
    assert score == points, report


def test_score_scale_partial_credit_and_hints():
    def ignores_variances(d_k, var_q=1.0, var_k=1.0):
        return d_k**-0.5

    score, report = check_report(check_score_scale, ignores_variances, [dict(d_k=64), dict(d_k=8, var_q=2.0, var_k=3.0)])
    assert score == 0.5 and "ignores var_q and var_k" in report and "d_k=8, var_q=2, var_k=3" in report, report


def test_float32_tolerance_holds_for_tf32_matmuls():
    def mm(a, b):
        return _tf32(a) @ _tf32(b) if a.dtype == torch.float32 else a @ b

    namespace = NB.student()
    namespace["scaled_scores"] = lambda q, k: mm(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    namespace["dot_product_variance"] = lambda q, k: torch.var(mm(q[:, None, :], k[:, :, None]).flatten())
    for gid, (points, message) in NB.grade_all(namespace=namespace).items():
        assert points == NB.points(gid), (gid, message)


def test_float64_inputs_need_float64_arithmetic():
    def variance_in_float32(q, k):
        return torch.var((q.float() * k.float()).sum(-1)).to(q.dtype)

    score, report = check_report(check_dot_product_variance, variance_in_float32, [dict(dtype="float64", n=400, d_k=32)],
                            device=CPU)
    assert score == 0.25 and "float32 precision only" in report, report


def test_unknown_case_keys_are_an_instructor_error():
    for check, spec in ((check_softmax, dict(axis=0)), (check_scaled_scores, dict(d_k=4)),
                        (check_dot_product_variance, dict(d=4)), (check_score_scale, dict(dk=4))):
        with pytest.raises(ValueError, match="unknown case keys"):
            check(lambda *a, **k: None, points=1, cases=[spec])
    with pytest.raises(ValueError, match="out of range"):
        check_softmax(lambda x, dim=-1: x, points=1, cases=[dict(shape=(2, 3), dim=2)])


# --------------------------------------------------------------------------
# the widget cells, in a real kernel


def _widget_notebook() -> nbformat.NotebookNode:
    probe = '''
import ipywidgets
for f in (show_variance, show_width):
    (slider,) = [w for w in f.widget.children if hasattr(w, "max")]
    log = hasattr(slider, "base")
    low, high = (slider.base**slider.min, slider.base**slider.max) if log else (slider.min, slider.max)
    for value in (low, high, slider.value):
        f(value)              # the callback itself: an error would end this cell
        slider.value = value  # and through the widget
print("ipywidgets", ipywidgets.__version__, "probe ok")
'''
    cells = [NB.cells["setup"]] + [NB.cells[gid] for gid in WIDGET_CELLS] + [nbformat.v4.new_code_cell(probe)]
    # Run them as a student's Jupyter does: the tag that keeps the grader from running them is ignored.
    cells = [nbformat.from_dict({**c, "metadata": {k: v for k, v in c.metadata.items() if k != "tags"}})
             for c in cells]
    return nbformat.v4.new_notebook(cells=cells, metadata=NB.nb.metadata)


def test_the_grader_skips_the_widget_cells():
    """They are not graded, and nbclient's widget support can stall them (jupyter/nbclient#312)."""
    for gid in WIDGET_CELLS:
        assert "skip-execution" in NB.cells[gid].metadata.get("tags", []), gid


def _outputs(nb) -> list[dict]:
    """Every output of the cells and of the Output widgets."""
    found = [o for c in nb.cells for o in c.get("outputs", [])]
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    return found + [o for m in state.values() if m.get("model_name") == "OutputModel"
                    for o in m["state"].get("outputs", [])]


IPYWIDGETS7 = os.environ.get("IPYWIDGETS7_PATH")


@pytest.mark.parametrize("ipywidgets", [
    "installed",
    pytest.param("7.7.1", marks=pytest.mark.skipif(not IPYWIDGETS7, reason="set IPYWIDGETS7_PATH (see the docstring)")),
])
def test_widget_cells_run_headless(ipywidgets, monkeypatch):
    from nbclient import NotebookClient

    if ipywidgets == "7.7.1":
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [IPYWIDGETS7, os.environ.get("PYTHONPATH")])))
    nb = _widget_notebook()
    # jupyter/nbclient#312: now and then, with widgets, a cell's reply is read only when the cell's
    # timeout ends (a stall, not a failure: the reply is there). Under load, 1 run in 3 here: two
    # minutes with a 120-s timeout. Each of these cells takes a few seconds.
    NotebookClient(nb, timeout=20, kernel_name="python3",
                   resources={"metadata": {"path": str(NB.path.parent)}}).execute()
    outputs = _outputs(nb)
    assert not [o for o in outputs if o["output_type"] == "error" or o.get("name") == "stderr"], outputs
    probe = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
    assert "probe ok" in probe
    if ipywidgets == "7.7.1":
        assert "ipywidgets 7.7.1" in probe
    for cell in nb.cells[1:3]:
        assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in cell.outputs)
    figures = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(figures) >= 2 + 2 * 3, "every slider position draws a figure"
