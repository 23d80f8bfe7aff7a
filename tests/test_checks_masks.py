"""In-process tests of the 05-masks checks (attention_checks.masks, judged by
attention_checks.answers.masks), driven by the source notebook: its own cells run here and each
test cell is scored with nbgrader's `determine_grade` on the outputs a kernel would record
(classroom/notebook.py).
"""
from __future__ import annotations

import ast
import math

import pytest
import torch
import torch.nn as nn

from classroom.notebook import SourceNotebook, _nbgrader, check_report, load_corpus, run_test_cell, tf32 as _tf32

from attention_checks.answers.judging import judge, judge_records, judged
from attention_checks.masks import (
    NONZERO,
    check_causal_mask,
    check_masked_attention,
    check_merge_masks,
    check_padding_mask,
)
from attention_checks.probe import probe_all
from attention_checks.record import _encode_outcome

ASSIGNMENT = "05-masks"
CPU = torch.device("cpu")
FUNCTIONS = ["padding_mask", "causal_mask", "merge_masks", "masked_attention"]
CHECKS = {"padding_mask": check_padding_mask, "causal_mask": check_causal_mask,
          "merge_masks": check_merge_masks, "masked_attention": check_masked_attention}

SOURCE = SourceNotebook(ASSIGNMENT)
NB, CELLS, SOLUTIONS, TESTS, MAX_SCORE = SOURCE.nb, SOURCE.cells, SOURCE.solutions, SOURCE.tests, SOURCE.max_score
student, grade_all = SOURCE.student, SOURCE.grade_all


def _check_call(cell) -> ast.Call:
    return ast.parse(cell.source).body[-1].value


def _cases_of(cell) -> list[dict]:
    """The literal case dicts of a test cell."""
    return SOURCE.cases(_nbgrader(cell)["grade_id"])


# --------------------------------------------------------------------------
# the corpus of simulated students

CORPUS = load_corpus(ASSIGNMENT)


def test_corpus_covers_every_function():
    for function in FUNCTIONS:
        expects = [e.expect for e in CORPUS if function in e.cells]
        assert expects.count("full") >= 2 and expects.count("partial") >= 4, function
    assert all(e.expect == "full" or e.hint for e in CORPUS), "a buggy student needs a hint"


# --------------------------------------------------------------------------
# references: PyTorch's own functions


def _grab(function: str, spec: dict) -> tuple[tuple, dict]:
    """The arguments a case passes to the student's function."""
    x = CHECKS[function].build(spec)
    return tuple(x.args.values()), x.kwargs


def _expected(function: str, spec: dict) -> dict:
    return judged(CHECKS[function], spec).expected


def _all_cases(function: str) -> list[dict]:
    return [spec for cell in TESTS.values() if f"check_{function}(" in cell.source for spec in _cases_of(cell)]


@pytest.mark.parametrize("spec", _all_cases("merge_masks") + [dict(B=4, H=2, L=6, S=6, attn="heads", seed=s)
                                                             for s in range(5)])
def test_merge_reference_is_the_logical_or_of_the_views(spec):
    """What nn.MultiheadAttention masks (read off its weights) is key_padding_mask (B, 1, 1, S) | attn_mask."""
    (kpm, attn, H), _ = _grab("merge_masks", spec)
    expected = _expected("merge_masks", spec)["mask"]
    B, _, L, S = expected.shape
    merged = torch.zeros(B, H, L, S, dtype=torch.bool)
    if kpm is not None:
        merged = merged | kpm.view(B, 1, 1, S)
    if attn is not None:
        merged = merged | (attn.view(B, H, L, S) if attn.dim() == 3 else attn)
    assert torch.equal(expected, merged)
    assert not merged.all(-1).any(), "a query with every key masked"


def test_merge_reference_follows_nn_multihead_attention():
    """The same positions get weight 0 in the module itself (batch_first, eval mode)."""
    spec = dict(B=3, H=2, L=4, S=6, attn="random", seed=4)
    (kpm, attn, H), _ = _grab("merge_masks", spec)
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(4, H, batch_first=True, dtype=torch.float64).eval()
    q, k = torch.randn(3, 4, 4, dtype=torch.float64), torch.randn(3, 6, 4, dtype=torch.float64)
    with torch.no_grad():
        _, weights = mha(q, k, k, key_padding_mask=kpm, attn_mask=attn, average_attn_weights=False)
    assert torch.equal(weights == 0, _expected("merge_masks", spec)["mask"])


@pytest.mark.parametrize("size", [1, 2, 5, 16])
def test_causal_reference(size):
    expected = _expected("causal_mask", dict(size=size))["mask"]
    assert torch.equal(expected, torch.ones(size, size, dtype=torch.bool).triu(1))


@pytest.mark.parametrize("spec", _all_cases("masked_attention"))
def test_attention_reference_weights_agree_with_pytorch_output(spec):
    (q, k, v), kwargs = _grab("masked_attention", spec)
    expected = _expected("masked_attention", spec)
    weights, output = expected["weights"], expected["output"]
    torch.testing.assert_close(weights @ v.double(), output, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1], dtype=torch.float64))
    hidden = torch.zeros(weights.shape, dtype=torch.bool)
    if "key_padding_mask" in kwargs:
        B, S = kwargs["key_padding_mask"].shape
        hidden = hidden | kwargs["key_padding_mask"].view(B, *[1] * (weights.dim() - 2), S)
    if "attn_mask" in kwargs:
        hidden = hidden | kwargs["attn_mask"]
    assert (weights[hidden] == 0).all() and (weights[~hidden] > 0).all()
    assert expected.get(NONZERO, 0) == 0 and (NONZERO in expected) == bool(kwargs)


def test_attention_reference_matches_nn_multihead_attention():
    """With identity projections, nn.MultiheadAttention's per-head weights are the reference's."""
    spec = dict(B=2, H=2, L=4, S=5, E=3, attn="random", dtype="float64", seed=1)
    (q, k, v), kwargs = _grab("masked_attention", spec)
    expected = _expected("masked_attention", spec)
    B, H, L, E = q.shape
    mha = nn.MultiheadAttention(H * E, H, batch_first=True, bias=False, dtype=torch.float64).eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(H * E).repeat(3, 1))
        mha.out_proj.weight.copy_(torch.eye(H * E))
        flat = [t.transpose(1, 2).reshape(B, -1, H * E) for t in (q, k, v)]
        out, weights = mha(*flat, average_attn_weights=False, **kwargs)
    torch.testing.assert_close(weights, expected["weights"], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out, expected["output"].transpose(1, 2).reshape(B, L, H * E),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("spec", _all_cases("padding_mask"))
def test_padding_cases_have_real_zeros_and_padding(spec):
    (tokens,), kwargs = _grab("padding_mask", spec)
    pad_id = kwargs.get("pad_id", 0)
    assert torch.equal(_expected("padding_mask", spec)["mask"], tokens == pad_id)
    if spec.get("padding", "right") != "none" and tokens.size(1) > 1:
        assert (tokens == pad_id).any()
    if pad_id == 3:
        assert (tokens == 0).any(), "0 must be an ordinary token when pad_id != 0"


def test_inputs_are_deterministic_and_leave_the_global_rng_alone():
    state = torch.random.get_rng_state()
    for function in FUNCTIONS:
        spec = dict(size=4) if function == "causal_mask" else dict()
        (args_a, kw_a), (args_b, kw_b) = _grab(function, spec), _grab(function, spec)
        for x, y in zip([*args_a, *kw_a.values()], [*args_b, *kw_b.values()]):
            assert not isinstance(x, torch.Tensor) or torch.equal(x, y)
    assert torch.equal(torch.random.get_rng_state(), state)
    # float32 and float64 cases with one seed see the same numbers
    q32 = _grab("masked_attention", dict(seed=7))[0][0]
    q64 = _grab("masked_attention", dict(seed=7, dtype="float64"))[0][0]
    assert torch.equal(q64.float(), q32)


@pytest.mark.parametrize("seed", range(30))
def test_generated_masks_never_hide_every_key_of_a_query(seed):
    for spec in [dict(B=4, L=6, S=3, attn="random"), dict(B=1, L=1, S=2, attn="random"), dict(B=3, L=7, S=7),
                 dict(B=5, L=2, S=9, attn="none")]:
        weights = _expected("masked_attention", dict(spec, seed=seed))["weights"]
        assert not weights.isnan().any()
        assert (weights.amax(-1) > 0).all()
    _expected("merge_masks", dict(B=3, H=2, L=5, S=4, attn="heads", seed=seed))  # asserts it itself


def test_unknown_or_impossible_cases_are_an_instructor_error():
    with pytest.raises(ValueError, match="unknown case keys"):
        check_padding_mask(lambda t: t, points=1, cases=[dict(pad=1)], device=CPU)
    with pytest.raises(ValueError, match="attn must be one of"):
        check_masked_attention(lambda *a: a, points=1, cases=[dict(attn="heads")], device=CPU)
    with pytest.raises(ValueError, match="needs key_padding_mask or attn_mask"):
        check_merge_masks(lambda *a: a, points=1, cases=[dict(padding=False, attn="none")], device=CPU)


# --------------------------------------------------------------------------
# outputs: exact booleans, exact zeros, the recorder


def test_masks_must_be_boolean_and_exact():
    reference = student()["padding_mask"]
    score, text = check_report(CHECKS["padding_mask"], lambda t, pad_id=0: reference(t, pad_id).to(torch.uint8), [dict()])
    assert score == 0.75 and "dtype uint8, expected bool" in text
    score, _ = check_report(CHECKS["padding_mask"], lambda t, pad_id=0: reference(t, pad_id).float() * 0.999, [dict()])
    assert score == 0.75  # right positions, wrong dtype
    one_off = lambda t, pad_id=0: reference(t, pad_id).index_put_((torch.tensor(0), torch.tensor(0)),  # noqa: E731
                                                                 torch.tensor(True))
    score, text = check_report(CHECKS["padding_mask"], one_off, [dict()])
    assert score < 1 and "values differ" in text


def test_merge_result_is_compared_after_broadcasting():
    reference = student()["merge_masks"]
    expanded = lambda *a: torch.broadcast_to(reference(*a), (2, 3, 5, 5)).clone()  # noqa: E731
    assert check_report(CHECKS["merge_masks"], expanded, [dict()])[0] == 1
    score, text = check_report(CHECKS["merge_masks"], lambda *a: reference(*a)[..., :2], [dict()])
    assert score == 0 and "shape (2, 1, 5, 2), expected (2, 3, 5, 5)" in text


@pytest.mark.parametrize("fill, passes", [(float("-inf"), True), (-1e9, True), (-1e4, True),
                                          ("finfo.min", True), (-30.0, False)])
def test_masked_weights_must_be_exactly_zero(fill, passes):
    def attention(query, key, value, key_padding_mask=None, attn_mask=None):
        scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
        B, S = key_padding_mask.shape
        value_ = torch.finfo(scores.dtype).min if fill == "finfo.min" else fill
        scores = scores.masked_fill(key_padding_mask.view(B, *[1] * (scores.dim() - 2), S) | attn_mask, value_)
        weights = scores.softmax(-1)
        return weights @ value, weights

    score, text = check_report(CHECKS["masked_attention"], attention, [dict(dtype="float64"), dict(H=2)])
    if passes:
        assert score == 1, text
    else:
        assert 0 < score < 1 and f"{NONZERO} : got" in text and "exactly 0" in text


def test_malformed_attention_results():
    reference = student()["masked_attention"]
    score, text = check_report(CHECKS["masked_attention"], lambda *a, **k: reference(*a, **k)[0], [dict()])
    assert score == 0 and "it must return a tuple (output, weights)" in text
    score, text = check_report(CHECKS["masked_attention"], lambda *a, **k: (reference(*a, **k)[0], None), [dict()])
    assert 0 < score < 1 and "expected a tensor, got NoneType" in text


@pytest.mark.parametrize("function", FUNCTIONS)
def test_outcomes_survive_the_recorder(function):
    """What the kernel records (bool masks, int counts) is judged the same by the grader."""
    check, fn, cases = CHECKS[function], student()[function], _all_cases(function)
    probed = probe_all(check, fn, cases, CPU)
    record = {"check": check.name, "forbidden": [],
              "outcomes": [_encode_outcome(o, like) for o, like in zip(probed.outcomes, probed.likes)]}
    here = judge(check, cases, probed.outcomes, points=1, devices=["cpu"] * len(cases))
    there = judge_records(check, record, cases, points=1)
    assert here.score == there.score == 1, there.text


# --------------------------------------------------------------------------
# GPU tolerances and diagnoses the corpus does not cover


def _attention_tf32(query, key, value, key_padding_mask=None, attn_mask=None):
    mm = (lambda a, b: _tf32(a) @ _tf32(b)) if query.dtype == torch.float32 else torch.matmul
    scores = mm(query, key.transpose(-2, -1)) / math.sqrt(query.size(-1))
    if key_padding_mask is not None:
        B, S = key_padding_mask.shape
        scores = scores.masked_fill(key_padding_mask.view(B, *[1] * (scores.dim() - 2), S), float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(attn_mask, float("-inf"))
    weights = scores.softmax(-1)
    return mm(weights, value), weights


def test_float32_tolerance_holds_for_tf32_matmuls():
    namespace = student()
    namespace["masked_attention"] = _attention_tf32
    for gid, cell in TESTS.items():
        if "check_masked_attention" in cell.source:
            points, message = run_test_cell(cell, namespace)
            assert points == float(_nbgrader(cell)["points"]), message


def _merge_bug(change: str):
    def merge(key_padding_mask, attn_mask, num_heads):
        if attn_mask is not None and attn_mask.dim() == 3:
            attn_mask = attn_mask.view(-1, num_heads, *attn_mask.shape[1:])
        B, S = key_padding_mask.shape
        pad = key_padding_mask.view(B, 1, 1, S)
        return {"sum": lambda: pad.long() + attn_mask.long(), "no padding": lambda: attn_mask,
                "no attn": lambda: pad, "as is": lambda: key_padding_mask}[change]()
    return merge


@pytest.mark.parametrize("change, cases, hint", [
    ("sum", [dict()], "Adding boolean masks as numbers"),
    ("no padding", [dict(attn="random")], "ignores key_padding_mask"),
    ("no attn", [dict(attn="heads")], "ignores attn_mask"),
    ("as is", [dict(attn="none", B=3, L=3)], "as (B, S) it is read as (L, S)"),
])
def test_more_merge_diagnoses(change, cases, hint):
    _, text = check_report(CHECKS["merge_masks"], _merge_bug(change), cases)
    assert hint in text, text


def _attention_bug(change: str):
    def attention(query, key, value, key_padding_mask=None, attn_mask=None):
        scores = query @ key.transpose(-2, -1)
        if change != "no scale":
            scores = scores / math.sqrt(query.size(-1))
        if key_padding_mask is not None and change not in ("no padding", "padding inverted"):
            B, S = key_padding_mask.shape
            scores = scores.masked_fill(key_padding_mask.view(B, *[1] * (scores.dim() - 2), S), float("-inf"))
        if change == "padding inverted":
            B, S = key_padding_mask.shape
            scores = scores.masked_fill(~key_padding_mask.view(B, *[1] * (scores.dim() - 2), S), float("-inf"))
        if attn_mask is not None and change != "no attn":
            scores = scores.masked_fill(attn_mask, float("-inf"))
        weights = scores.softmax(-1)
        return weights @ value, weights
    return attention


@pytest.mark.parametrize("change, cases, hint", [
    ("no scale", [dict(H=2)], "not scaled"),
    ("no scale", [dict(padding=False, attn="none")], "not scaled"),
    ("no padding", [dict(L=3, S=6, attn="random")], "ignores key_padding_mask"),
    ("no attn", [dict(H=3)], "ignores attn_mask"),
    ("padding inverted", [dict(H=2, attn="random")], "Your mask is inverted"),
])
def test_more_attention_diagnoses(change, cases, hint):
    _, text = check_report(CHECKS["masked_attention"], _attention_bug(change), cases)
    assert hint in text, text


def test_padding_transposed_and_causal_hints():
    _, text = check_report(CHECKS["padding_mask"], lambda t, pad_id=0: (t == pad_id).T, [dict(B=2, S=6)])
    assert "transposed" in text
    _, text = check_report(CHECKS["causal_mask"], lambda n: torch.ones(n, n, dtype=torch.bool).triu(1).T, [dict(size=4)])
    assert "below the diagonal" in text  # the lower triangle without the diagonal


# --------------------------------------------------------------------------
# every failure explains itself (issue 18)


def test_structure_hints_name_the_dtype_and_not_the_input():
    """An int64 mask from int64 token ids: the report asks for bool, not 'the input's' dtype."""
    reference = student()["padding_mask"]
    _, text = check_report(CHECKS["padding_mask"], lambda t, pad_id=0: reference(t, pad_id).long(), [dict()])
    assert "dtype int64, expected bool;" in text and "the input's" not in text
    assert "as a boolean tensor" in text


def test_a_one_token_causal_mask_names_both_mistakes():
    """For size 1 an inverted mask and a masked diagonal are the same [[True]]: the hint names both,
    never one picked; size 4 tells them apart."""
    _, text = check_report(CHECKS["causal_mask"], lambda n: torch.ones(n, n, dtype=torch.bool).tril(), [dict(size=1), dict(size=4)])
    one, four = text.split("case 2")
    assert "cannot tell them apart" in one and "True where attention is allowed" in one, text
    assert "cannot tell them apart" not in four and "True where attention is allowed" in four, text


def test_nan_counts_come_without_a_zero_error():
    _, text = check_report(CHECKS["causal_mask"], lambda n: torch.zeros(n, n).masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1),
                                                                            float("-inf")), [dict(size=3)])
    assert "max abs error 0 " not in text and "float mask" in text, text


@pytest.mark.parametrize("bug, hint", [
    ('scores = torch.einsum("ble,bse->bls", query, key) / math.sqrt(query.size(-1))', "subscripts name 3 dimensions"),
    ("scores = scores.masked_fill(attn_mask, float(\"-inf\"))", "attn_mask may be None"),
])
def test_crashes_get_a_hint_from_the_exception_and_the_contract(bug, hint):
    source = SOLUTIONS["masked_attention"]
    if "einsum" in bug:
        source = source.replace("scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))", bug)
    else:
        source = source.replace('if attn_mask is not None:\n        scores = scores.masked_fill(attn_mask, float("-inf"))',
                                bug)
    assert source != SOLUTIONS["masked_attention"]
    fn = student({"masked_attention": source})["masked_attention"]
    _, text = check_report(CHECKS["masked_attention"], fn, [dict(H=2), dict(attn="none")])
    assert "raised" in text and hint in text, text
    for block in text.split("\n\n")[1:]:  # every line of a case under it (an exception's own lines left out)
        assert block.startswith("case ") and all(line.startswith("    ") for line in block.splitlines()[1:]), block
