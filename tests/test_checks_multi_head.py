"""In-process tests of the 04-multi-head checks (attention_checks.multi_head, judged by
attention_checks.answers.multi_head), driven by the source notebook: its own cells are executed
(setup, reference solutions, test cells) and each test cell is scored with nbgrader's
`determine_grade` on the outputs a kernel would record (classroom/notebook.py).
"""
from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from classroom.notebook import SourceNotebook, check_report, load_corpus, run_test_cell, tf32

from attention_checks import CheckFailed
from attention_checks.answers.judging import judge, judge_records, judged
from attention_checks.answers.multi_head import mha_formula, mha_reference, multiply_adds_reference
from attention_checks.core import ForbiddenCalls
from attention_checks.multi_head import (
    FORBIDDEN_MHA,
    check_merge_heads,
    check_mha_multiply_adds,
    check_mha_parameter_count,
    check_multi_head_attention,
    check_split_heads,
)
from attention_checks.probe import probe_all
from attention_checks.record import _encode_outcome

ASSIGNMENT = "04-multi-head"
CPU = torch.device("cpu")

SOURCE = SourceNotebook(ASSIGNMENT)
NB, CELLS, SOLUTIONS, TESTS, MAX_SCORE = SOURCE.nb, SOURCE.cells, SOURCE.solutions, SOURCE.tests, SOURCE.max_score
student, grade_all = SOURCE.student, SOURCE.grade_all
# Assignment 04 grades MultiHeadAttention without masks; 05 (part 5, after the chapter on masks) grades
# the same check's mask cases on the class completed there. Tests of the check's masks use that class.
MASKED = SourceNotebook("05-masks")
MASK_KEYS = ("key_padding_mask", "attn_mask")
GRADED = ["split_heads", "merge_heads", "MultiHeadAttention", "mha_parameter_count", "mha_multiply_adds"]
CHECKS = {"check_split_heads", "check_merge_heads", "check_multi_head_attention", "check_mha_parameter_count",
          "check_mha_multiply_adds"}


# --------------------------------------------------------------------------
# the corpus of simulated students

CORPUS = load_corpus(ASSIGNMENT)


# --------------------------------------------------------------------------
# forbidden: nn.MultiheadAttention and F.multi_head_attention_forward, however reached

SMALL = [dict(), dict(key_padding_mask="bool", L=4, S=6)]


def _reference_class():
    """The reference MultiHeadAttention with masks: notebook 05's."""
    return MASKED.student()["MultiHeadAttention"]


def _mha_test_cells():
    """(notebook, grade_id) of every test cell that grades MultiHeadAttention, in 04 and 05."""
    return [(nb, gid) for nb in (SOURCE, MASKED) for gid, cell in nb.tests.items()
            if "check_multi_head_attention" in cell.source]


def test_each_notebook_grades_only_what_its_chapter_has_taught():
    """04 comes before the chapter on masks: its MultiHeadAttention cases have none, and every case
    of 05's has one (issue 19, item 7)."""
    cells = _mha_test_cells()
    assert {nb.assignment for nb, _ in cells} == {ASSIGNMENT, MASKED.assignment}
    for nb, gid in cells:
        cases = nb.cases(gid)
        masked = [any(case.get(k, "none") != "none" for k in MASK_KEYS) for case in cases]
        assert masked == [nb is MASKED] * len(cases), (nb.assignment, gid)
    assert sum(MASKED.points(gid) for nb, gid in cells if nb is MASKED) == 4


def _functional_cheat(call):
    Reference = _reference_class()

    class Cheat(Reference):
        def forward(self, query, key, value, key_padding_mask=None, attn_mask=None, need_weights=True,
                    average_attn_weights=True):
            mine = super().forward(query, key, value, key_padding_mask, attn_mask, need_weights, average_attn_weights)
            try:
                call(self, query, key, value, key_padding_mask)
            except Exception:
                pass  # swallowing an error hides nothing
            return mine

    return Cheat


def _mhaf(fn):
    def call(self, query, key, value, key_padding_mask):
        return fn(query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1), self.embed_dim,
                  self.num_heads, self.in_proj_weight, self.in_proj_bias, None, None, False, 0.0,
                  self.out_proj.weight, self.out_proj.bias, training=False, key_padding_mask=key_padding_mask)
    return call


def _native(fn):
    def call(self, query, key, value, key_padding_mask):
        return fn(query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias,
                  self.out_proj.weight, self.out_proj.bias)
    return call


def _inside_forward(self, query, key, value, key_padding_mask):
    mha = nn.MultiheadAttention(self.embed_dim, self.num_heads, batch_first=True).to(query)
    return mha(query, key, value, key_padding_mask=key_padding_mask)


def _wrapper():
    class Wrapper(nn.Module):  # the real module as a submodule, its parameters renamed by hand
        def __init__(self, embed_dim, num_heads, bias=True):
            super().__init__()
            self.inner = nn.MultiheadAttention(embed_dim, num_heads, bias=bias, batch_first=True)

        def load_state_dict(self, state, strict=True):
            return self.inner.load_state_dict(state, strict)

        def forward(self, query, key, value, **kwargs):
            return self.inner(query, key, value, **kwargs)

    return Wrapper


def _subclass_own_forward():
    Reference = _reference_class()

    class Sub(nn.MultiheadAttention):  # inherits the parameters, computes with the reference code
        def __init__(self, embed_dim, num_heads, bias=True):
            super().__init__(embed_dim, num_heads, bias=bias, batch_first=True)
            self.head_dim = embed_dim // num_heads

        forward = Reference.forward

    return Sub


def _subclass():
    class Sub(nn.MultiheadAttention):
        def __init__(self, embed_dim, num_heads, bias=True):
            super().__init__(embed_dim, num_heads, bias=bias, batch_first=True)

    return Sub


@pytest.mark.parametrize("how, shown", [
    ("F", "F.multi_head_attention_forward"),
    ("alias", "F.multi_head_attention_forward"),
    ("torch.nn.functional", "F.multi_head_attention_forward"),
    ("native", "nn.MultiheadAttention"),
    ("aten op", "nn.MultiheadAttention"),
    ("inside forward", "F.multi_head_attention_forward"),
    ("submodule", "nn.MultiheadAttention"),
    ("subclass", "nn.MultiheadAttention"),
    ("subclass, own forward", "nn.MultiheadAttention"),
])
def test_forbidden_api_is_caught_however_it_is_reached(how, shown):
    from torch.nn.functional import multi_head_attention_forward as alias

    cls = {
        "F": lambda: _functional_cheat(_mhaf(F.multi_head_attention_forward)),
        "alias": lambda: _functional_cheat(_mhaf(alias)),
        "torch.nn.functional": lambda: _functional_cheat(_mhaf(torch.nn.functional.multi_head_attention_forward)),
        "native": lambda: _functional_cheat(_native(torch._native_multi_head_attention)),
        "aten op": lambda: _functional_cheat(_native(torch.ops.aten._native_multi_head_attention.default)),
        "inside forward": lambda: _functional_cheat(_inside_forward),
        "submodule": _wrapper,
        "subclass": _subclass,
        "subclass, own forward": _subclass_own_forward,
    }[how]()
    with pytest.raises(CheckFailed, match=f"calls .*{re.escape(shown)}.*earns no points"):
        check_multi_head_attention(cls, points=2, cases=SMALL, device=CPU)


def test_forbidden_detector_ignores_other_calls():
    with ForbiddenCalls(FORBIDDEN_MHA) as guard:
        x = torch.randn(2, 3, 4)
        F.scaled_dot_product_attention(x, x, x)
        F.linear(x, torch.randn(4, 4)).softmax(-1)
        nn.Linear(4, 4)(x)
    assert guard.seen == []


def test_the_reference_may_use_scaled_dot_product_attention():
    class WithSDPA(_reference_class()):
        def forward(self, query, key, value, key_padding_mask=None, attn_mask=None, need_weights=True,
                    average_attn_weights=True):
            out, weights = super().forward(query, key, value, key_padding_mask, attn_mask, need_weights,
                                           average_attn_weights)
            F.scaled_dot_product_attention(query, key, value)
            return out, weights

    assert check_report(check_multi_head_attention, WithSDPA, SMALL)[1].startswith("✓")


# --------------------------------------------------------------------------
# references, inputs, masks


def _captured(spec):
    """The case as judged, and its inputs as the student's module receives them (with its state dict)."""
    x = check_multi_head_attention.build(spec)
    return judged(check_multi_head_attention, spec), dict(x.named, state=x.extra["state"])


MHA_SPECS = [
    dict(), dict(L=3, S=7), dict(bias=False, dtype="float64"), dict(average_attn_weights=False, H=4),
    dict(attn_mask="bool", key_padding_mask="bool", S=6),
    dict(attn_mask="float", key_padding_mask="float", L=4, S=9, H=4),
    dict(attn_mask="bool", mask_per_head=True, key_padding_mask="bool", batch=3, E=16, H=4),
    dict(attn_mask="float", mask_per_head=True, L=3, S=4, H=4, average_attn_weights=False),
    dict(need_weights=False, key_padding_mask="bool"), dict(batch=1, L=1, S=2, E=6, H=3),
]


@pytest.mark.parametrize("spec", MHA_SPECS, ids=repr)
def test_formula_agrees_with_nn_multihead_attention(spec):
    c = check_multi_head_attention.spec(spec)
    case, got = _captured(spec)

    def f64(t):
        return t if t is None or t.dtype == torch.bool else t.double()

    params = {name: p.double() for name, p in got["state"].items()}
    args = [got[n].double() for n in ("query", "key", "value")]
    kpm, am = f64(got.get("key_padding_mask")), f64(got.get("attn_mask"))
    formula = mha_formula(params, c["H"], *args, kpm, am, c["average_attn_weights"])
    torch.testing.assert_close(formula["attn_output"], case.expected["attn_output"], rtol=1e-12, atol=1e-12)
    output, weights = mha_reference(params, c["H"], *args, kpm, am, True, c["average_attn_weights"])
    torch.testing.assert_close(formula["attn_weights"], weights, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1], dtype=torch.float64))
    if c["need_weights"]:
        torch.testing.assert_close(weights, case.expected["attn_weights"], rtol=1e-12, atol=1e-12)
    else:
        assert case.expected["attn_weights is None"] is True
    assert not case.expected["attn_output"].isnan().any()


@pytest.mark.parametrize("spec", [dict(attn_mask="bool", key_padding_mask="bool", L=6, S=3, H=4),
                                  dict(attn_mask="bool", key_padding_mask="bool", mask_per_head=True, batch=4, S=2),
                                  dict(attn_mask="float", key_padding_mask="float", L=7, S=2)])
def test_generated_masks_never_hide_every_key_of_a_query(spec):
    c = check_multi_head_attention.spec(spec)
    for seed in range(20):
        _, got = _captured(dict(spec, seed=seed))
        am, kpm = got["attn_mask"], got["key_padding_mask"]
        B, H = got["query"].size(0), c["H"]
        blocked_am = am if am.dtype == torch.bool else am.isinf()
        blocked_kpm = kpm if kpm.dtype == torch.bool else kpm.isinf()
        per_head = blocked_am.view(B, H, *blocked_am.shape[-2:]) if blocked_am.dim() == 3 else blocked_am
        assert not (per_head | blocked_kpm[:, None, None, :]).all(-1).any()
        # attn_mask and its inverse keep a key in every row (key_padding_mask may lose its padding
        # where both masks would otherwise hide every key)
        assert (~blocked_am).any(-1).all() and blocked_am.any(-1).all() and (~blocked_kpm).any(-1).all()


def test_inputs_are_deterministic_and_leave_the_global_rng_alone():
    state = torch.random.get_rng_state()
    _, a = _captured(dict(attn_mask="float", key_padding_mask="float"))
    _, b = _captured(dict(attn_mask="float", key_padding_mask="float"))
    _, c = _captured(dict(attn_mask="float", key_padding_mask="float", seed=1))
    check_mha_parameter_count.build(dict())
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(a[k], b[k]) for k in ("query", "attn_mask", "key_padding_mask"))
    assert all(torch.equal(a["state"][k], b["state"][k]) for k in a["state"])
    assert not torch.equal(a["query"], c["query"])
    _, x32 = _captured(dict(seed=7))
    _, x64 = _captured(dict(seed=7, dtype="float64"))
    assert torch.equal(x64["query"].float(), x32["query"])
    assert x64["query"] is x64["key"] is x64["value"]  # self-attention: one tensor


def test_multiply_adds_reference_is_what_pytorch_computes():
    from torch.utils.flop_counter import FlopCounterMode

    for n, d, h in [(4, 512, 8), (1, 8, 2), (7, 12, 3), (33, 16, 16)]:
        module = nn.MultiheadAttention(d, h, batch_first=True, device="meta")
        x = torch.empty(1, n, d, device="meta")
        with FlopCounterMode(display=False) as counter:
            module(x, x, x)
        assert counter.get_total_flops() == 2 * multiply_adds_reference(n, d, h) == 2 * (4 * n * d * d + 2 * n * n * d)


def test_parameter_count_reference():
    for E, H, bias in [(16, 4, True), (16, 8, True), (512, 8, True), (15, 5, False)]:
        count = judged(check_mha_parameter_count, dict(embed_dim=E, num_heads=H, bias=bias)).expected["count"]
        assert count == 4 * E * E + 4 * E * bias
    assert judged(check_mha_parameter_count, dict(embed_dim=16, num_heads=4)).expected["count"] == 1088


def test_unknown_case_keys_and_bad_combinations_are_instructor_errors():
    with pytest.raises(ValueError, match="unknown case keys"):
        check_multi_head_attention(nn.Module, points=1, cases=[dict(num_heads=2)], device=CPU)
    with pytest.raises(ValueError, match="one kind"):
        check_multi_head_attention(nn.Module, points=1, cases=[dict(attn_mask="bool", key_padding_mask="float")])
    with pytest.raises(ValueError, match="divisible"):
        check_split_heads(lambda x, h: x, points=1, cases=[dict(E=6, H=4)])


# --------------------------------------------------------------------------
# plain values, and outcomes as the autograder records and judges them


def test_numbers_in_other_types_are_taken_as_ints():
    import numpy as np

    for answer in (lambda E, H, bias=True: np.int64(4 * E * E + 4 * E),
                   lambda E, H, bias=True: torch.tensor(4 * E * E + 4 * E),
                   lambda E, H, bias=True: float(4 * E * E + 4 * E)):
        assert check_report(check_mha_parameter_count, answer, [dict(), dict(embed_dim=8)])[1].startswith("✓")
    assert "got '1088', expected 1088" in check_report(check_mha_parameter_count, lambda E, H, bias=True: "1088", [dict()])[1]
    assert "got 1088.5, expected 1088" in check_report(check_mha_parameter_count, lambda E, H, bias=True: 1088.5, [dict()])[1]


def _builders():
    ns = student()
    yield check_split_heads, ns["split_heads"], [dict(), dict(dtype="float64", batch=1, L=1)]
    yield check_merge_heads, ns["merge_heads"], [dict(), dict(dtype="float64", H=1)]
    yield check_multi_head_attention, _reference_class(), [
        dict(check="parameters"), dict(check="parameters", bias=False), dict(need_weights=False),
        dict(attn_mask="bool", L=3, S=4), dict(dtype="float64", average_attn_weights=False, H=4)]
    yield check_mha_parameter_count, ns["mha_parameter_count"], [dict(), dict(bias=False)]
    yield check_mha_multiply_adds, ns["mha_multiply_adds"], [dict(), dict(n=4096, d=512, num_heads=8)]


def _wrong():
    """A wrong answer of each kind, to see its verdict survive the record."""
    ns = student()
    Reference = _reference_class()

    class NeverNone(Reference):
        def forward(self, *args, **kwargs):
            out, weights = super().forward(*args, **{**kwargs, "need_weights": True})
            return out * 2, weights

    return {check_split_heads: lambda x, h: ns["split_heads"](x, h).flip(-1),
            check_merge_heads: lambda x: ns["merge_heads"](x).flip(-1),
            check_multi_head_attention: NeverNone, check_mha_parameter_count: lambda *a, **k: 7,
            check_mha_multiply_adds: lambda *a: 7.5}


def test_recorded_outcomes_are_judged_as_in_the_kernel():
    """The grader's verdict on the recorded outcomes is the one the student sees in the notebook."""
    wrong = _wrong()
    for check, right, cases in _builders():
        for fn in (right, wrong[check]):
            probed = probe_all(check, fn, cases, CPU)
            assert all(o.error is None for o in probed.outcomes), [o.error for o in probed.outcomes]
            here = judge(check, cases, probed.outcomes, points=2, devices=["cpu"] * len(cases))
            record = {"check": check.name, "forbidden": probed.forbidden,
                      "outcomes": [_encode_outcome(o, like) for o, like in zip(probed.outcomes, probed.likes)]}
            there = judge_records(check, record, cases, points=2)
            assert (here.score, here.text) == (there.score, there.text)
            assert (here.score == 2) == (fn is right), here.text


def test_the_grader_scan_finds_the_forbidden_names():
    from autograder.grading.scanner import SourceScanner, StudentObject

    names = sorted(set(FORBIDDEN_MHA.values()))
    for entry in CORPUS:
        cells = {**SOLUTIONS, **entry.cells}
        found = SourceScanner(list(cells.values())).uses(StudentObject("MultiHeadAttention"), names)
        expected = {"mha_wraps_nn_multihead_attention": ["nn.MultiheadAttention"],
                    "mha_calls_functional": ["F.multi_head_attention_forward"]}.get(entry.name, [])
        assert found == expected, entry.name


# --------------------------------------------------------------------------
# tolerances: float32 holds with TF32 matmuls, as on a GPU


def _tf32_mha_class():
    Reference = _reference_class()

    def mm(a, b):
        return tf32(a) @ tf32(b) if a.dtype == torch.float32 else a @ b

    class TF32(Reference):
        def forward(self, query, key, value, key_padding_mask=None, attn_mask=None, need_weights=True,
                    average_attn_weights=True):
            B, L, E = query.shape
            S, H = key.size(1), self.num_heads
            w = self.in_proj_weight.chunk(3)
            b = self.in_proj_bias.chunk(3) if self.in_proj_bias is not None else (0, 0, 0)
            q, k, v = (mm(x, wi.T) + bi for x, wi, bi in zip((query, key, value), w, b))
            q, k, v = (x.view(B, x.size(1), H, -1).transpose(1, 2) for x in (q, k, v))
            scores = mm(q, k.transpose(-2, -1)) / math.sqrt(E // H)
            if attn_mask is not None:
                m = attn_mask.view(B, H, L, S) if attn_mask.dim() == 3 else attn_mask
                scores = scores.masked_fill(m, float("-inf")) if m.dtype == torch.bool else scores + m
            if key_padding_mask is not None:
                m = key_padding_mask.view(B, 1, 1, S)
                scores = scores.masked_fill(m, float("-inf")) if m.dtype == torch.bool else scores + m
            weights = scores.softmax(-1)
            out = mm(mm(weights, v).transpose(1, 2).reshape(B, L, E), self.out_proj.weight.T)
            if self.out_proj.bias is not None:
                out = out + self.out_proj.bias
            return out, (weights.mean(1) if average_attn_weights else weights) if need_weights else None

    return TF32


def test_float32_tolerance_holds_for_tf32_matmuls():
    for nb, gid in _mha_test_cells():  # 04's cases and 05's masks
        namespace = nb.student()
        namespace["MultiHeadAttention"] = _tf32_mha_class()
        points, message = run_test_cell(nb.cells[gid], namespace)
        assert points == nb.points(gid), message


def test_outputs_on_another_dtype_lose_the_structure_share():
    Reference = _reference_class()

    class Float64Out(Reference):
        def forward(self, query, *args, **kwargs):
            out, weights = super().forward(query, *args, **kwargs)
            return out.double(), weights

    text = check_report(check_multi_head_attention, Float64Out, [dict()])[1]
    assert "dtype float64, expected float32" in text


# --------------------------------------------------------------------------
# diagnoses the corpus does not cover


def _mha_variant(**change):
    Reference = _reference_class()

    class Variant(Reference):
        def forward(self, query, key, value, key_padding_mask=None, attn_mask=None, need_weights=True,
                    average_attn_weights=True):
            B, L, E = query.shape
            S, H = key.size(1), self.num_heads
            w_q, w_k, w_v = self.in_proj_weight.chunk(3)
            b_q, b_k, b_v = self.in_proj_bias.chunk(3)
            if change.get("untransposed"):
                q, k, v = query @ w_q + b_q, key @ w_k + b_k, value @ w_v + b_v
            else:
                q, k, v = F.linear(query, w_q, b_q), F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)
            if change.get("interleaved"):
                q, k, v = (x.view(B, -1, E // H, H).permute(0, 3, 1, 2) for x in (q, k, v))
            else:
                q, k, v = (x.view(B, -1, H, E // H).transpose(1, 2) for x in (q, k, v))
            scores = q @ k.transpose(-2, -1) / (1 if change.get("no_scale") else math.sqrt(E // H))
            if key_padding_mask is not None and not change.get("ignore_kpm"):
                scores = scores.masked_fill(key_padding_mask.view(B, 1, 1, S), float("-inf"))
            weights = scores.softmax(-1)
            out = self.out_proj((weights @ v).transpose(1, 2).reshape(B, L, E))
            weights = weights.sum(1) if change.get("summed") else weights.mean(1)
            return out, weights

    return Variant


@pytest.mark.parametrize("change, cases, hint", [
    (dict(untransposed=True), [dict()], "in_proj_weight untransposed"),
    (dict(interleaved=True), [dict(H=4)], "interleaved features"),
    (dict(no_scale=True), [dict(E=16, H=2)], "not scaled"),
    (dict(ignore_kpm=True), [dict(key_padding_mask="bool")], "ignores key_padding_mask"),
    (dict(summed=True), [dict(H=4)], "summed over the heads"),
])
def test_more_mha_diagnoses(change, cases, hint):
    text = check_report(check_multi_head_attention, _mha_variant(**change), cases)[1]
    assert hint in text, text


@pytest.mark.parametrize("fn, hint", [
    (lambda x: x.mean(1), "You average the heads"),
    (lambda x: x.sum(1), "You sum the heads"),
])
def test_more_merge_diagnoses(fn, hint):
    assert hint in check_report(check_merge_heads, fn, [dict()])[1]


def test_more_count_diagnoses():
    def one_head(E, H, bias=True):
        return 3 * E * (E // H) + 3 * (E // H) + E * E + E

    assert "shrinks with num_heads" in check_report(check_mha_parameter_count, one_head, [dict(), dict(num_heads=8)])[1]
    only_attention = check_report(check_mha_multiply_adds, lambda n, d, h: 2 * n * n * d, [dict()])[1]
    assert "leaves out the projections" in only_attention


# --------------------------------------------------------------------------
# every failure explains itself (issue 18): characteristic patterns and crashes


def test_a_float_mask_used_as_a_boolean_is_named():
    """Its output is only NaN: the hint says which mistake makes them."""
    Reference = _reference_class()

    class FloatAsBool(Reference):
        def forward(self, query, key, value, key_padding_mask=None, attn_mask=None, **kwargs):
            as_bool = [None if m is None else m != 0 for m in (key_padding_mask, attn_mask)]
            return super().forward(query, key, value, *as_bool, **kwargs)

    text = check_report(check_multi_head_attention, FloatAsBool, [dict(key_padding_mask="float"),
                                                             dict(attn_mask="float", L=4, S=6)])[1]
    assert "float mask is used as a boolean" in text, text
    assert "hint" not in text.split("... and")[-1] or "case" in text.split("... and")[-1]


@pytest.mark.parametrize("bug", ["no None check", "einsum"])
def test_crashes_get_a_hint_from_the_exception_and_the_contract(bug):
    solution = MASKED.solutions["MultiHeadAttention"]
    if bug == "no None check":  # key_padding_mask viewed without asking whether there is one
        source = solution.replace("merge_masks(key_padding_mask, attn_mask, H)",
                                  "attn_mask | key_padding_mask.view(B, 1, 1, S)")
        cases, hint = [dict(attn_mask="bool"), dict(attn_mask="bool", key_padding_mask="bool")], \
            "key_padding_mask may be None"
    else:  # subscripts for one head: q and k are (B, H, L, D)
        source = solution.replace("scores = q @ k.transpose(-2, -1)", "scores = torch.einsum('bld,bsd->bls', q, k)")
        cases, hint = [dict(), dict(key_padding_mask="bool")], "einsum subscripts name 3 dimensions, but the tensor has 4"
    assert source != solution
    ns = MASKED.student({"MultiHeadAttention": source})
    text = check_report(check_multi_head_attention, ns["MultiHeadAttention"], cases)[1]
    assert "raised" in text and hint in text, text
    assert set(re.findall(r"hint: (.+)", text)) - {"as above"} == {next(h for h in re.findall(r"hint: (.+)", text))}


def test_no_hint_stands_after_the_cases_it_belongs_to():
    """A later case with a new hint is shown with its hint, never a hint line on its own."""
    ns = student()
    Reference = ns["MultiHeadAttention"]

    class NoScaleWithHeads(Reference):  # right for one head, and wrong otherwise
        def forward(self, query, key, value, *args, **kwargs):
            out, weights = super().forward(query, key, value, *args, **kwargs)
            return (out, weights) if self.num_heads == 1 else (out * 0, weights)

    cases = [dict(), dict(L=3), dict(L=4), dict(L=6), dict(H=1, E=6), dict(need_weights=False)]
    text = check_report(check_multi_head_attention, NoScaleWithHeads, cases)[1]
    for block in text.split("\n\n")[1:]:
        lines = block.splitlines()
        assert not any(line.lstrip().startswith("hint:") for line in lines) or lines[0].startswith("case "), block
