"""What is specific to 07-additive-attention's checks: the LSTM inputs are what nn.LSTM gives,
the references agree with PyTorch where it has the piece, every known mistake is told apart
by a visible case, weights that do not fit say why, and the notebook's training exercise
learns (and is skipped under the grader). (Layout, full marks, stub and corpus:
tests/test_declared_checks.py.)"""
from __future__ import annotations

import contextlib
import io
import os

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from attention_checks.additive_attention import check_additive_attention, check_lstm_attention_pooling
from attention_checks.answers.judging import judged
from classroom.notebook import SourceNotebook, check_report

NB = SourceNotebook("07-additive-attention")


@pytest.mark.parametrize("spec", [dict(padding=True), dict(num_layers=3, padding=True, B=5, D=7)])
def test_lstm_inputs_are_each_texts_own_lstm_run(spec):
    """Packed padded texts: h_n[-1] is the top layer's state after each text's own last token, the
    outputs there are the LSTM's own outputs, and the padded outputs are zeros."""
    inputs = check_lstm_attention_pooling.build(spec)
    outputs, h_n = inputs.args["outputs"].double(), inputs.args["h_n"].double()
    lengths = (~inputs.kwargs["key_padding_mask"]).sum(-1)
    assert len(set(lengths.tolist())) > 1  # the batch really is padded
    for b, n in enumerate(lengths.tolist()):
        assert torch.equal(outputs[b, n:], torch.zeros_like(outputs[b, n:]))
        torch.testing.assert_close(h_n[-1, b], outputs[b, n - 1], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("spec", [dict(), dict(num_heads=4, hidden_size=16, padding=True, num_layers=2)])
def test_dot_pooling_reference_agrees_with_pytorch_attention(spec):
    """The dot-product reference is F.scaled_dot_product_attention of one query per head."""
    case = judged(check_lstm_attention_pooling, spec)
    state, H = case.x.extra["state"], case.spec["num_heads"]
    outputs, h_n = case.x.args["outputs"], case.x.args["h_n"]
    B, D, E = outputs.shape
    heads = lambda t: t.view(B, -1, H, E // H).transpose(1, 2)  # noqa: E731 - (B, H, n, d)
    q = heads(h_n[-1:].transpose(0, 1) @ state["w_q.weight"].T)
    k, v = heads(outputs @ state["w_k.weight"].T), heads(outputs @ state["w_v.weight"].T)
    mask = case.x.kwargs.get("key_padding_mask")
    keep = None if mask is None else ~mask[:, None, None, :]
    z = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)  # (B, H, 1, d)
    pooled = z.transpose(1, 2).reshape(B, E) @ state["w_o.weight"].T
    torch.testing.assert_close(case.expected["pooled"], pooled, rtol=1e-12, atol=1e-12)
    assert case.expected["weights"].shape == (B, H, D)


def test_additive_reference_agrees_with_the_formula_pair_by_pair():
    case = judged(check_additive_attention, dict(padding=True))
    state, x = case.x.extra["state"], case.x
    q, k, mask = x.args["query"], x.args["key"], x.kwargs["key_padding_mask"]
    B, L, S = case.expected["weights"].shape
    for b in range(B):
        for i in range(L):
            scores = torch.stack([state["v.weight"][0] @ torch.tanh(state["w_q.weight"] @ q[b, i] +
                                                                      state["w_k.weight"] @ k[b, j])
                                  for j in range(S)])
            weights = scores.masked_fill(mask[b], float("-inf")).softmax(-1)
            torch.testing.assert_close(case.expected["weights"][b, i], weights, rtol=1e-12, atol=1e-12)
    assert (case.expected["weights"].masked_select(mask[:, None, :]) == 0).all()


@pytest.mark.parametrize("check", [check_additive_attention, check_lstm_attention_pooling], ids=lambda c: c.name)
def test_every_known_mistake_is_told_apart_by_a_visible_case(check):
    assert NB.uncaught_mistakes(check) == set()


def test_misnamed_parameters_are_named_in_the_report():
    class Renamed(nn.Module):
        def __init__(self, query_size, key_size, hidden_size):
            super().__init__()
            self.query_proj = nn.Linear(query_size, hidden_size, bias=False)
            self.w_k = nn.Linear(key_size, hidden_size, bias=False)
            self.v = nn.Linear(hidden_size, 1, bias=False)

    report = check_report(check_additive_attention, Renamed, [dict()])[1]
    assert "w_q.weight" in report and "w_q, w_k and v" in report, report


def test_an_extra_unused_parameter_is_allowed():
    Pooling = NB.student()["LSTMAttentionPooling"]

    class WithExtra(Pooling):
        def __init__(self, hidden_size, num_heads=1, score="dot"):
            super().__init__(hidden_size, num_heads, score)
            self.unused = nn.Parameter(torch.randn(3))

    assert check_report(check_lstm_attention_pooling, WithExtra, [dict(), dict(score="additive")])[1].startswith("✓")


def test_training_exercise_learns_and_is_skipped_while_grading(monkeypatch):
    """The ungraded last cell trains classifiers with the reference pooling to a high accuracy,
    and does nothing under the autograder (ATTENTION_CHECKS_RECORD=1)."""
    source = NB.cells["training"].source
    namespace = NB.student()
    threads = torch.get_num_threads()
    try:
        monkeypatch.setenv("ATTENTION_CHECKS_RECORD", "1")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(source, "<training>", "exec"), dict(namespace))
        assert out.getvalue().strip() == "Training skipped while grading."
        monkeypatch.delenv("ATTENTION_CHECKS_RECORD")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(source, "<training>", "exec"), dict(namespace))
    finally:
        torch.set_num_threads(threads)
    accuracies = [float(line.split("test accuracy ")[1].split()[0]) for line in out.getvalue().splitlines()
                  if "test accuracy" in line]
    assert len(accuracies) == 2 and min(accuracies) > 0.9, out.getvalue()
    assert os.environ.get("ATTENTION_CHECKS_RECORD") is None
