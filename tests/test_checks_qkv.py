"""What is specific to 03-qkv's checks: the references agree with PyTorch, and the
diagnoses the corpus does not cover name their mistakes. (Layout, full marks, stub and
corpus: tests/test_declared_checks.py; the shared machinery: tests/test_check_machinery.py.)"""
from __future__ import annotations

import math

import pytest
import torch

from attention_checks.answers.judging import judged
from attention_checks.qkv import check_project_qkv, check_scaled_dot_product_attention
from classroom.notebook import SourceNotebook, check_report

NB = SourceNotebook("03-qkv")
CPU = torch.device("cpu")


@pytest.mark.parametrize("spec", [dict(), dict(mask="bool", L=3, S=7), dict(mask="float", batch=(2, 3), L=6, S=3),
                                  dict(is_causal=True, L=6, S=3), dict(is_causal=True, L=2, S=5, scale=0.3),
                                  dict(scale=0.0)])
def test_reference_weights_agree_with_pytorch_output(spec):
    case = judged(check_scaled_dot_product_attention, spec)
    weights, output = case.expected["weights"], case.expected["output"]
    torch.testing.assert_close(weights @ case.x.args["value"], output, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1], dtype=torch.float64))


@pytest.mark.parametrize("check", [check_project_qkv, check_scaled_dot_product_attention], ids=lambda c: c.name)
def test_every_known_mistake_is_told_apart_by_a_visible_case(check):
    assert NB.uncaught_mistakes(check) == set()


def _buggy(**change):
    """The reference with one step changed."""

    def sdpa(query, key, value, attn_mask=None, is_causal=False, scale=None):
        L, S, E = query.size(-2), key.size(-2), query.size(-1)
        s = 1 / math.sqrt(E) if scale is None else scale
        if change.get("falsy_scale"):
            s = scale or 1 / math.sqrt(E)
        scores = query @ key.transpose(-2, -1)
        scores = (scores + attn_mask) * s if change.get("mask_before_scale") else scores * s
        if is_causal:
            keep = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(change.get("diagonal", 0))
            keep = keep.T.contiguous() if change.get("flip") and L == S else keep
            scores = scores.masked_fill(~keep, float("-inf"))
        if attn_mask is not None and attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf")) if not change.get("after") else scores
        elif attn_mask is not None and not change.get("mask_before_scale"):
            scores = scores + attn_mask
        weights = scores.softmax(-1)
        if change.get("after") and attn_mask is not None:
            weights = weights * attn_mask
        if change.get("divide_scale") and scale is not None:
            return _buggy()(query, key, value, attn_mask, is_causal, 1 / scale)
        return weights @ value, weights

    return sdpa


@pytest.mark.parametrize("change, cases, hint", [
    (dict(flip=True), [dict(is_causal=True)], "causal mask is flipped"),
    (dict(diagonal=-1), [dict(is_causal=True, L=4, S=6)], "attend key i itself"),
    (dict(after=True), [dict(mask="bool")], "before the softmax"),
    (dict(mask_before_scale=True), [dict(mask="float")], "after scaling"),
    (dict(divide_scale=True), [dict(scale=0.5)], "you seem to divide"),
    (dict(falsy_scale=True), [dict(scale=0.0)], "scale=0.0 is a value, not the default"),
])
def test_more_diagnoses(change, cases, hint):
    report = check_report(check_scaled_dot_product_attention, _buggy(**change), cases)[1]
    assert hint in report, report


def test_an_explicit_zero_scale_is_graded():
    """scale=0.0 is a scale like any other (uniform weights), tested in a hidden case."""
    assert any(spec.get("scale") == 0.0 for gid in NB.tests for spec in NB.cases(gid)
               if "check_scaled_dot_product_attention" in NB.tests[gid].source)
    case = judged(check_scaled_dot_product_attention, dict(scale=0.0))
    S = case.expected["weights"].size(-1)
    torch.testing.assert_close(case.expected["weights"], torch.full_like(case.expected["weights"], 1 / S))
