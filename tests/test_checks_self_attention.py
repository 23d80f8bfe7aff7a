"""In-process tests of the 01-self-attention checks (attention_checks.self_attention, judged by
attention_checks.answers.self_attention), driven by the source notebook."""
from __future__ import annotations

import contextlib
import io
import math

import pytest
import torch

from attention_checks.answers.judging import judged
from attention_checks.self_attention import check_attention_scores, check_simple_self_attention
from classroom.notebook import SourceNotebook, check_report
from classroom.notebook import tf32 as _tf32

ASSIGNMENT = "01-self-attention"
NB = SourceNotebook(ASSIGNMENT)
CPU = torch.device("cpu")
FUNCTIONS = {"attention_scores": check_attention_scores, "simple_self_attention": check_simple_self_attention}


# --------------------------------------------------------------------------
# the notebook's structure


def test_hidden_tests_cover_the_edge_cases():
    for function in FUNCTIONS:
        cases = [c for gid in NB.hidden() if f"check_{function}(" in NB.cells[gid].source for c in NB.cases(gid)]
        assert any(c.get("B") == 1 for c in cases) and any(c.get("L") == 1 for c in cases), function
        assert any(c.get("dtype") == "float64" for c in cases) and any("seed" in c for c in cases), function
        assert any(c.get("L", 5) != c.get("D", 8) and c.get("L", 5) % 2 for c in cases), function


# --------------------------------------------------------------------------
# the cases and the known mistakes


@pytest.mark.parametrize("function", FUNCTIONS)
def test_every_known_mistake_fails_a_visible_case(function):
    assert NB.uncaught_mistakes(FUNCTIONS[function]) == set()


def _mm(a, b):
    """A matmul as a GPU runs it with TF32 allowed (float32 inputs rounded to a 10-bit mantissa)."""
    return _tf32(a) @ _tf32(b) if a.dtype == torch.float32 else a @ b


def _tf32_attention(x):
    weights = (_mm(x, x.transpose(-2, -1)) / math.sqrt(x.size(-1))).softmax(-1)
    return _mm(weights, x), weights


def test_float32_tolerance_holds_for_tf32_matmuls():
    namespace = NB.student()
    namespace["attention_scores"] = lambda x: _mm(x, x.transpose(-2, -1))
    namespace["simple_self_attention"] = _tf32_attention
    for gid, (points, message) in NB.grade_all(namespace=namespace).items():
        assert points == NB.points(gid), (gid, message)


def test_inputs_are_deterministic_and_leave_the_global_rng_alone():
    state = torch.random.get_rng_state()
    grab = [check_simple_self_attention.build(spec).args["x"]
            for spec in (dict(), dict(), dict(seed=1), dict(seed=7, dtype="float64"), dict(seed=7))]
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(grab[0], grab[1]) and not torch.equal(grab[0], grab[2])
    assert torch.equal(grab[3].float(), grab[4])  # the same numbers in every dtype


def test_reference_weights_agree_with_pytorch_output():
    for spec in (dict(), dict(B=1, L=4, D=512, std=0.2), dict(dtype="float64", L=1)):
        case = judged(check_simple_self_attention, spec)
        weights, output = case.expected["weights"], case.expected["output"]
        torch.testing.assert_close(weights @ case.x.args["x"], output, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1], dtype=torch.float64))


def test_inputs_modified_in_place_do_not_confuse_the_diagnosis():
    def scales_in_place(x):
        x /= x.size(-1) ** 0.25  # x xᵀ / sqrt(D), and the caller's tensor changes
        return x @ x.transpose(-2, -1)

    report = check_report(check_attention_scores, scales_in_place, [dict(dtype="float64")])[1]
    assert "x @ xᵀ" in report and "scaling belongs to simple_self_attention" in report, report


def test_float64_computed_in_float32_is_reported():
    def in_float32(x):
        y = x.float()
        return (y @ y.transpose(-2, -1)).to(x.dtype)

    report = check_report(check_attention_scores, in_float32, [dict(dtype="float64")])[1]
    assert "float32 precision only" in report, report


def test_wrong_results_and_errors_get_partial_credit():
    reference = NB.student()["simple_self_attention"]

    def fails_for_one_token(x):
        if x.size(1) == 1:
            raise IndexError("no neighbours")
        return reference(x)

    with contextlib.redirect_stdout(io.StringIO()) as out:
        score = check_simple_self_attention(fails_for_one_token, points=2, cases=[dict(), dict(L=1)], device=CPU)
    assert score == 1.0 and "raised IndexError: no neighbours" in out.getvalue()


def test_unknown_case_keys_are_an_instructor_error():
    with pytest.raises(ValueError, match="unknown case keys"):
        check_attention_scores(lambda x: x, points=1, cases=[dict(d=4)], device=CPU)


def test_printing_inside_is_swallowed(capfd):
    reference = NB.student()["attention_scores"]

    def noisy(x):
        print("hello")
        return reference(x)

    assert check_attention_scores(noisy, points=1, cases=[dict()], device=CPU) is None
    out, err = capfd.readouterr()
    assert err == "" and "hello" not in out and out.startswith("✓")


def test_a_look_alike_mistake_is_named_beside_the_students_own():
    """Dividing by sqrt(L) = 2 on a case with D = 512 gives nearly one-hot weights, within the
    tolerance of no scaling at all: the case cannot tell the two apart, so its hint names both,
    the closer (the student's own, exact) first, and never one picked."""
    def divides_by_sqrt_length(x):
        weights = torch.softmax(x @ x.transpose(-2, -1) / math.sqrt(x.size(1)), dim=-1)
        return weights @ x, weights

    report = check_report(check_simple_self_attention, divides_by_sqrt_length, [dict(B=1, L=4, D=512, std=0.2)])[1]
    hint = next(line for line in report.splitlines() if line.strip().startswith("hint:"))
    assert "cannot tell them apart" in hint, report
    own, alike = hint.find("divided by sqrt(L)"), hint.find("without the scaling")
    assert 0 <= own < alike, report
