"""Localising a mistake by experiment (issue 59, items 1 to 3): the ladders of small cases the
checks declare, run where student code runs and judged outside it.

In-process, no kernel: every ladder is right for the model solution; a mistake planted along an
axis is localised to that axis (and inside a module, to the first step that differs); a correct
function costs no reference of a ladder; the ladders are bounded in cases and time; the same
code gets the same finding and record; a verified diagnosis keeps its hint alone; the ladder
leaves the notebook's random state and later cells as they were; and no finding's words hold
another corpus mistake's hint."""
from __future__ import annotations

import functools
import json
import math
import random
import time

import pytest
import torch
import torch.nn.functional as F

from attention_checks import localise
from attention_checks.answers import attention_at_scale as answers_09
from attention_checks.answers import judging, localising
from attention_checks.answers.judging import judge, judge_records, judged
from attention_checks.localise import MOST_CASES, Ladder, decode_ladder, encode_ladder, run_ladder
from attention_checks.record import MIME, Outcome, _encode, _encode_outcome
from attention_checks.registry import load_all
from classroom import load_corpus
from classroom.notebook import SourceNotebook

CHECKS = {check.name: check for check in load_all().values()}
LADDERED = sorted(name for name, check in CHECKS.items() if check.axes is not None)


@functools.cache
def _model(assignment: str) -> dict:
    return SourceNotebook(assignment).student()


def _model_object(name: str):
    check = CHECKS[name]
    space = _model(check.assignment)
    return space[name] if name in space else space[check.kind == "class" and "GroupedQueryAttention" or name]


def _finding(name: str, student) -> str | None:
    """What the grader says of a student's ladder (as judging does for a failed name)."""
    check = CHECKS[name]
    return judging.localised(check, run_ladder(check, student))


# --------------------------------------------------------------------------
# the ladders themselves


@pytest.mark.parametrize("name", LADDERED)
def test_every_ladder_is_right_for_the_model_solution(name, monkeypatch):
    monkeypatch.setattr(localise, "TIME_LIMIT_S", float("inf"))  # every rung, however loaded the machine
    check = CHECKS[name]
    ran = run_ladder(check, _model_object(name))
    assert len(ran.outcomes) == len(check.axes.cases()) <= MOST_CASES
    wrong = [spec for spec, outcome in zip(check.axes.cases(), ran.outcomes)
             if not judging.rung_right(check, spec, outcome)]
    assert not wrong, wrong
    assert judging.localised(check, ran) is None


def test_every_rung_changes_one_thing_and_says_so():
    for name in LADDERED:
        axes = CHECKS[name].axes
        assert len({repr(sorted(case.items())) for case in axes.cases()}) == len(axes.cases()), name
        for axis in axes.axes:
            assert axis.said and axis.where and all(step.said and step.changes for step in axis.steps), name


def test_no_finding_holds_another_corpus_mistakes_hint():
    """A finding is a hint line: it must not hold the ``# hint:`` of a corpus student of its
    assignment (tests/test_hints.py's rule), whatever rungs it names."""
    for assignment in sorted({CHECKS[name].assignment for name in LADDERED}):
        hints = {e.hint.lower() for e in load_corpus(assignment, cli=True) if e.hint}
        words = [localising.LEAD, localising.STEP_BY_STEP, localising.RELATED]
        for name in LADDERED:
            axes = CHECKS[name].axes
            if CHECKS[name].assignment != assignment:
                continue
            for axis in axes.axes:
                words += [localising._change(axis, axis.said, step.said, right) for step in axis.steps
                          for right in (True, False)]
            words.append(localising.along_axes(axes, [False] * len(axes.cases())))
            words += [said for _, said in axes.steps]
        clashes = {(hint, text) for text in words for hint in hints if hint in text.lower()}
        assert not clashes, clashes


# --------------------------------------------------------------------------
# a planted mistake is localised to its axis


def _flash(bug: str):
    return lambda q, k, v, block_size, causal=False: answers_09.tiled_attention(q, k, v, block_size, causal, bug)


def _flash_heads_mixed(q, k, v, block_size, causal=False):
    """Every leading row reads the first row's keys (a fresh mistake: no catalogue names it)."""
    return answers_09.tiled_attention(q, k[..., :1, :, :].expand_as(k) if k.dim() > 3 else k[:1].expand_as(k),
                                      v, block_size, causal)


def _flash_wide_values(q, k, v, block_size, causal=False):
    return answers_09.tiled_attention(q, k, v[..., :q.shape[-1]], block_size, causal)


@pytest.mark.parametrize("student, expected", [
    (_flash("last key block skipped"), "right with two blocks of keys; wrong with a last, partial block of keys"),
    (_flash("output not rescaled"), "right with one block of keys; wrong with two blocks of keys"),
    (_flash("last query block skipped"), "wrong with a last, partial block of queries"),
    (_flash("causal ignored"), "right with no mask; wrong with causal=True in one tile"),
    (_flash("tile indices"), "right with causal=True in one tile; wrong with causal=True over 2 by 2 tiles"),
    (_flash("bottom right"), "wrong with causal=True with L=6 < S=10"),
    (_flash_heads_mixed, "right with one leading dim of 1; wrong with a leading dim of 3"),
    (_flash_wide_values, "right with values as wide as keys; wrong with values of width 3"),
    (_flash("no shift"), "wrong with two blocks of keys with scores in the hundreds"),
])
def test_a_flash_attention_mistake_is_localised_to_its_axis(student, expected):
    assert expected in (_finding("flash_attention", student) or ""), _finding("flash_attention", student)


def _rope(inverse_frequencies):
    def rope(x, positions, base=10000.0):
        half = x.shape[-1] // 2
        angles = positions.to(torch.float64)[:, None] * inverse_frequencies(float(base), half)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        a, b = x[..., :half], x[..., half:]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], -1)
    return rope


RIGHT_ROPE = _rope(lambda base, half: base ** (-torch.arange(half, dtype=torch.float64) / half))


@pytest.mark.parametrize("student, expected", [
    (_rope(lambda base, half: base ** (torch.arange(half, dtype=torch.float64) / half)),
     "right with one pair (D=2, frequency 1); wrong with two pairs of features (D=4)"),
    (_rope(lambda base, half: base ** (-torch.arange(1, half + 1, dtype=torch.float64) / half)),
     "right with position 0 alone (no rotation); wrong with positions 0, 1"),
    (lambda x, positions, base=10000.0: RIGHT_ROPE(x, torch.arange(x.shape[-2]), base),
     "right with positions 0..4; wrong with positions that start further on"),
    (lambda x, positions, base=10000.0: RIGHT_ROPE(x, positions), "right with the default base; wrong with base=100"),
])
def test_a_rope_mistake_is_localised_to_its_axis(student, expected):
    assert expected in (_finding("apply_rope", student) or ""), _finding("apply_rope", student)


def _alibi(slope, offset=True):
    def alibi(num_heads, L, S=None):
        S = S or L
        slopes = torch.tensor([slope(h, num_heads) for h in range(num_heads)], dtype=torch.float64)
        distance = torch.arange(S)[None, :] - (torch.arange(L) + (S - L if offset else 0))[:, None]
        return slopes[:, None, None] * distance
    return alibi


@pytest.mark.parametrize("student, expected", [
    (_alibi(lambda h, H: 2 ** (-8 * H / (h + 1))), "right with one head; wrong with 2 heads"),
    (_alibi(lambda h, H: 2 ** (-8 * (h + 1) / H), offset=False),
     "right with 4 queries and keys; wrong with the last 2 queries of 5 positions"),
])
def test_an_alibi_mistake_is_localised_to_its_axis(student, expected):
    assert expected in (_finding("alibi_bias", student) or ""), _finding("alibi_bias", student)


class _CacheKeepingTheFirstUpdate:
    def __init__(self):
        self.k = self.v = None

    def __len__(self):
        return 0 if self.k is None else self.k.shape[-2]

    def update(self, k, v):
        if self.k is None:
            self.k, self.v = k, v
        return self.k, self.v


def test_a_cache_mistake_is_localised_to_the_second_update():
    assert "right with one update; wrong with a second update" in _finding("KVCache", _CacheKeepingTheFirstUpdate)


def _model_with(name: str, old: str, new: str):
    """The model solution's class or function ``name`` with one edit to its cell (a planted mistake)."""
    nb = SourceNotebook(CHECKS[name].assignment)
    cell = next(gid for gid, source in nb.solutions.items() if f"class {name}(" in source or f"def {name}(" in source)
    assert old in nb.solutions[cell]
    return nb.student({cell: nb.solutions[cell].replace(old, new)})[name]


def _model_source(name: str) -> str:
    nb = SourceNotebook(CHECKS[name].assignment)
    return next(source for source in nb.solutions.values() if f"class {name}(" in source or f"def {name}(" in source)


def _gqa_with(old: str, new: str):
    return _model_with("GroupedQueryAttention", old, new)


@pytest.mark.parametrize("old, new, expected", [
    ("v = self.w_v(x)", "v = self.w_k(x)", "the value projection (w_v) is never called"),
    ("out.transpose(1, 2).reshape(B, T, d_model)", "out.reshape(B, T, d_model)",
     "what w_o is given (the attention's output, its heads merged) differs from the reference's"),
    ("return self.w_o(", "return x + self.w_o(", "your forward changes w_o's output before it returns it"),
    ("return self.w_o(", "return (", "the output projection (w_o) is never called as a module"),
    # the diagonal hidden: wrong with one position too (no key left), so nothing along the axes
    ("cols > rows", "cols >= rows", "differs from the reference's: the mistake lies before the output projection (w_o)"),
    ("k = torch.repeat_interleave(k, group, dim=1)", "k = k.repeat(1, group, 1, 1)",
     "right with one key/value head for 2 query heads; wrong with 4 query heads sharing 2 key/value heads"),
])
def test_a_modules_first_wrong_step_is_named(old, new, expected):
    found = _finding("GroupedQueryAttention", _gqa_with(old, new)) or ""
    assert expected in found, found


@pytest.mark.parametrize("name, old, new, expected", [
    # the reference is a PyTorch module of the same names: its own steps, recorded as the student's are
    ("EncoderLayer", "torch.relu(self.linear1(h))", "torch.relu(self.linear1(src))",
     "the feed-forward's first layer (linear1) is given other values than the reference's (its input differs): "
     "look at what you pass to it (before it, the self-attention (self_attn) and the first LayerNorm (norm1) are right)"),
    ("DecoderLayer", "torch.relu(self.linear1(x))", "torch.relu(self.linear1(tgt))",
     "(before it, the self-attention (self_attn) and the cross-attention (multihead_attn) are right)"),
    ("DecoderLayer", "self.multihead_attn(x, memory, memory,", "self.multihead_attn(x, x, memory,",
     "the cross-attention (multihead_attn) is given other values than the reference's (its key differs)"),
    ("Encoder", "for layer in self.layers:", "for layer in self.layers[1:]:",
     "the first layer (layers.0) is never called as a module"),
    ("Encoder", "        return output\n", "        return output + src\n",
     "every step is right (the first layer (layers.0)); your output is the reference's plus the input src"),
    ("Encoder", "        return output\n", "        return F.layer_norm(output, output.shape[-1:])\n",
     "your output is the reference's normalised over its last axis"),
    ("Encoder", "        return output\n", "        return 2 * output\n",  # neither relation holds: none is claimed
     "every step is right (the first layer (layers.0)); what your forward does after them differs from the reference's."),
    ("Decoder", "        return out\n", "        return out + tgt\n", "your output is the reference's plus the input tgt"),
    ("Transformer", "memory = self.encoder(src,", "memory = self.encoder(tgt,",
     "the encoder (encoder) is given other values than the reference's (its src differs)"),
])
def test_a_stacks_first_wrong_step_is_named_against_the_references_own_steps(name, old, new, expected):
    """Where the reference is a PyTorch module with the submodules a finding names, the student's
    steps are compared with the reference's own, input by input: a post-norm layer's second step is
    never expected to get the module's input (the finding once said so of every failing DecoderLayer)."""
    found = _finding(name, _model_with(name, old, new)) or ""
    assert expected in found, found
    assert "is not given the module's input" not in found


def _self_attention_then(after):
    def student(x):
        weights = torch.softmax(x @ x.transpose(-2, -1) / x.size(-1) ** 0.5, dim=-1)
        return after(x, weights @ x), weights
    return student


@pytest.mark.parametrize("after, expected", [
    (lambda x, out: out + x, "your output is the reference's plus the input x: your code adds a residual"),
    (lambda x, out: F.layer_norm(out, out.shape[-1:]), "normalised over its last axis (mean 0, variance 1)"),
    (lambda x, out: out + 2 * x, None),  # near a residual, yet not one: no relation is said
    (lambda x, out: out - out.mean(-1, keepdim=True), None),  # centred, not normalised
])
def test_a_relation_to_the_references_output_is_said_only_where_it_holds(after, expected):
    found = _finding("simple_self_attention", _self_attention_then(after)) or ""
    if expected is None:
        assert localising.RELATED not in found, found
    else:
        assert found.startswith(localising.RELATED) and expected in found, found


def test_a_scalar_output_gets_its_finding_too():
    """No relation is tried where there is no last axis: a variance summed over the samples (one
    number) is still told what its ladder shows (the relations once raised there, and the grader's
    second run fell back to the first, with no finding)."""
    def over_the_samples(q, k):
        scores = (q * k).sum(dim=0)
        return ((scores - scores.mean()) ** 2).sum() / (scores.numel() - 1)

    found = _finding("dot_product_variance", over_the_samples) or ""
    assert localising.LEAD in found and "(`scores = (q * k).sum(dim=0)`) is the first" in found, found


@pytest.mark.parametrize("name, student, expected", [
    ("padding_mask", lambda tokens, pad_id=0: (tokens == pad_id).any(0),
     "it lacks the reference's axis 0 (the one whose size changes with 3 sentences) ((3,) where the reference's is (1, 3)"),
    ("causal_mask", lambda size: torch.ones(size, dtype=torch.bool),  # square: which axis is missing cannot be told
     "it lacks one of the reference's axes 0 and 1 ((2,) where the reference's is (2, 2)"),
    ("merge_heads", lambda x: x.reshape(x.shape[0], -1), "it merges the reference's axes 1 and 2 into one"),
    ("shift_right", lambda tgt, start_token: torch.cat([torch.full_like(tgt[:, :1], start_token), tgt], 1),
     "it has 1 entry too many along the reference's axis 1"),
    ("causal_mask", lambda size: torch.ones(2 * size, size, dtype=torch.bool).triu(1), None),  # no one relation
    ("shift_right", lambda tgt, start_token: tgt.flip(1), None),  # the right shape: values only
])
def test_a_shape_wrong_on_every_rung_is_said_by_how_it_differs(name, student, expected):
    """Where an output's shape is wrong on every localising case, the finding says how it differs
    from the reference's, one relation that holds on every case; none where no relation does."""
    found = _finding(name, student) or ""
    if expected is None:
        assert "the shape of your" not in found, found
    else:
        assert f"{localising.LEAD}on every one, the shape of your" in found and expected in found, found


def _scores_then(after):
    return lambda x: after(x @ x.transpose(-2, -1))


@pytest.mark.parametrize("student, expected", [
    (_scores_then(lambda s: s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), 0.0)),
     "are exactly those above the diagonal of its last two axes"),
    (_scores_then(lambda s: s + torch.eye(s.shape[-1], dtype=s.dtype)), "are exactly those on the diagonal"),
    (_scores_then(lambda s: torch.cat([s[:1], s[1:] * 2], 0)), "are all at indices 1, 2 of its axis 0 (of 3)"),
    (_scores_then(lambda s: s * 2), None),  # every entry differs: nothing to say of where
])
def test_the_entries_that_differ_in_the_first_wrong_case_are_said_where_they_are_not_all(student, expected):
    found = _finding("attention_scores", student) or ""
    said = "In the first case it gets wrong"
    assert (said in found and expected in found) if expected else said not in found, found


@pytest.mark.parametrize("student, expected", [
    (lambda q, k: 2 * (q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5, "your scores is the reference's times a factor: 2 in"),
    (lambda q, k: q @ k.transpose(-2, -1) / q.shape[-1], "times a factor: 0.5 (1/2) with d=4"),  # 1/sqrt(d) again
    (lambda q, k: q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5 + 1, None),  # shifted, not scaled
])
def test_a_factor_is_said_only_where_each_wrong_case_is_the_reference_times_one_number(student, expected):
    found = _finding("scaled_scores", student) or ""
    assert (expected in found) if expected else "times a factor" not in found, found


def test_no_factor_is_said_of_one_number():
    """Any wrong number is a multiple of the right one: that says nothing."""
    right = _model_object("dot_product_variance")
    assert "times a factor" not in (_finding("dot_product_variance", lambda q, k: right(q, k) + 0.01) or "x")


def test_a_step_called_with_keywords_is_recorded_as_one_called_by_position():
    student = _model_with("EncoderLayer", "self.self_attn(src, src, src,", "self.self_attn(query=src, key=src, value=src,")
    ladder = run_ladder(CHECKS["EncoderLayer"], student)
    assert set(ladder.steps["self_attn"].given) == {"query", "key", "value"}
    assert judging.localised(CHECKS["EncoderLayer"], ladder) is None  # right on every rung: nothing to say


def test_a_step_whose_forward_takes_any_arguments_is_recorded_too():
    """A submodule whose forward is ``forward(self, *inputs)`` (a student's own) is still observed:
    never "never called" when it was called."""
    class Doubles(torch.nn.Module):
        def forward(self, *inputs, **options):
            return inputs[0] * 2

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Doubles()

        def forward(self, x):
            return self.inner(x, scale=torch.ones(1))

    with localise.StepRecorder(["inner"]) as recorder:
        Outer()(torch.ones(2))
    assert list(recorder.seen["inner"].given) == ["inputs[0]", "scale"]


def test_a_distribution_filter_taken_from_the_wrong_end_is_localised_to_top_k():
    right = _model_object("next_token_distribution")

    def wrong_end(logits, temperature=1.0, top_k=None, top_p=None):
        if top_k is None:
            return right(logits, temperature, None, top_p)
        scaled = logits / temperature
        kth = scaled.topk(top_k, -1, largest=False).values[..., -1:]
        return right(scaled.masked_fill(scaled < kth, float("-inf")), 1.0, None, top_p)

    assert "right with no top-k; wrong with top_k=1" in _finding("next_token_distribution", wrong_end)


# --------------------------------------------------------------------------
# inside a function: the first line whose values the reference never computes


@pytest.mark.parametrize("name, old, new, line", [
    # a temperature of 1/2 slipped into a softmax written out: the reference's own softmax, written out, shows
    # its shifted scores, so the line after them is named
    ("softmax", "exps = shifted.exp()", "exps = (2 * shifted).exp()", "exps = (2 * shifted).exp()"),
    ("simple_self_attention", "weights = torch.softmax(scores, dim=-1)", "weights = torch.softmax(scores ** 2, dim=-1)",
     "weights = torch.softmax(scores ** 2, dim=-1)"),
    # the unbiased variance: the mean before it is right, the variance is not (the reference is F.layer_norm,
    # one fused call, written out)
    ("LayerNorm", "var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)",
     "var = ((x - mean) ** 2).sum(dim=dims, keepdim=True) / (x.shape[-1] - 1)", "var = ((x - mean) ** 2).sum("),
    # a constant made from no input: the frequencies counted from one
    ("apply_rope", "torch.arange(d // 2,", "torch.arange(1, d // 2 + 1,", "freq = base ** (-2 * torch.arange(1, d // 2 + 1,"),
    ("apply_rope", "return torch.cat((a * c - b * s, a * s + b * c), dim=-1)",
     "return torch.cat((a * c + b * s, a * s - b * c), dim=-1)", "return torch.cat((a * c + b * s, a * s - b * c)"),
])
def test_a_functions_first_line_that_leaves_the_references_values_is_named(name, old, new, line):
    found = _finding(name, _model_with(name, old, new)) or ""
    assert localising.STEP_BY_STEP in found and f"(`{line}" in found, found
    assert "is the first to make values that the reference never computes" in found, found


def test_a_mistake_that_shows_on_a_rung_only_is_traced_on_the_first_rung_it_gets_wrong():
    """Masked with 0 instead of -inf: right without a mask (the smallest case), so the calls are
    compared on the first rung that is wrong, and the finding says which one."""
    student = _model_with("masked_attention", 'scores = scores.masked_fill(attn_mask, float("-inf"))',
                          "scores = scores.masked_fill(attn_mask, 0.0)")
    found = _finding("masked_attention", student) or ""
    assert found.startswith("The first case it gets wrong (a causal mask), step by step against the reference: "
                            "line "), found
    assert "(`scores = scores.masked_fill(attn_mask, 0.0)  # (L, S) broadcasts`) is the first" in found, found


def test_a_line_that_makes_a_wrong_single_number_is_never_said_to_be_right():
    """The threshold taken one place too far: its line calls topk (the reference's values) and then
    slices one number per row (one row: a single number, which is not judged). The line is not
    said to make the reference's values; the first line judged wrong after it is named."""
    student = _model_with("next_token_distribution", ".values[..., -1:]", ".values[..., -2:-1]")
    found = _finding("next_token_distribution", student) or ""
    assert "(`p = p.masked_fill(p < kth_largest, 0.0)`) is the first" in found, found
    threshold = next(i + 1 for i, line in enumerate(_model_source("next_token_distribution").splitlines())
                     if "kth_largest = torch.topk" in line)
    right = found.split("Before it, ")[1].split(".")[0]  # "line 4 makes the reference's values"
    assert right.startswith("line") and str(threshold) not in right.split(" make")[0], found


def test_a_step_written_another_way_is_right_where_what_is_made_from_it_is():
    """A softmax written without the shift: its exponentials are not the reference's (shifted) ones,
    yet the weights made from them are, so the line named is the later one that is wrong."""
    def attention(x):
        exps = torch.exp(x @ x.transpose(-2, -1) / math.sqrt(x.size(-1)))
        weights = exps / exps.sum(dim=-1, keepdim=True)
        return weights @ x.flip(-1), weights
    found = _finding("simple_self_attention", attention) or ""
    assert "(`return weights @ x.flip(-1), weights`) is the first" in found, found
    assert "Before it, lines" in found and "exps = torch.exp" not in found, found


def test_a_line_that_changes_nothing_in_the_smallest_case_is_said():
    """Scaled by the square root of the batch size, which is 1 in the smallest case: the scaled scores
    are the reference's unscaled ones, so the softmax after them is the first line that differs, and
    the line that left its values unchanged is said with it."""
    def attention(x):
        scores = x @ x.transpose(-2, -1)
        scores = scores / math.sqrt(x.size(0))
        weights = torch.softmax(scores, dim=-1)
        return weights @ x, weights
    found = _finding("simple_self_attention", attention) or ""
    first = attention.__code__.co_firstlineno
    assert f"line {first + 3} of the cell that defines your `attention` (`weights = torch.softmax(scores, dim=-1)`)" \
        in found, found
    assert f"Line {first + 2} leaves the values given to it unchanged in this case." in found, found


def test_an_output_that_is_one_of_the_references_earlier_values_is_said_so():
    found = _finding("softmax", _model_with("softmax", "return exps / exps.sum(dim=dim, keepdim=True)",
                                            "return exps")) or ""
    assert "your output holds values the reference computes on its way (in its softmax)" in found, found


def test_a_line_after_one_that_makes_the_references_output_is_named_where_the_reference_shows_no_step():
    """project_qkv's reference is one product per output, so it shows no step between its inputs and
    its outputs; a line after one that makes the reference's own output is still named, since that
    earlier line anchors the code's computation to the reference's."""
    student = _model_with("project_qkv", "q = x @ w_q  # (..., L, d_k)", "q = x @ w_q\n    q = q / q.norm()")
    found = _finding("project_qkv", student) or ""
    assert "(`q = q / q.norm()`) is the first to make values" in found, found


def test_nothing_is_said_step_by_step_where_the_reference_shows_no_step():
    """A reference that is one opaque call shows no value between its inputs and its output: no line
    can be said to leave it."""
    check = CHECKS["simple_self_attention"]
    ladder = run_ladder(check, _model_with("simple_self_attention", "weights = torch.softmax(scores, dim=-1)",
                                           "weights = torch.softmax(scores ** 2, dim=-1)"))
    base = judged(check, check.axes.cases()[0], judging.REFERENCES)
    calls, outcome = ladder.calls[0], ladder.outcomes[0]
    assert calls and localising.first_call_that_differs(calls, outcome, base, lambda: base.x.args["x"].exp()) is not None
    opaque = lambda: (base.expected["output"].clone(), base.expected["weights"].clone())  # noqa: E731
    assert localising.first_call_that_differs(calls, outcome, base, opaque) is None


def test_values_are_the_same_only_in_the_same_order():
    x = torch.arange(24, dtype=torch.float64).reshape(2, 3, 4)
    same = functools.partial(localising._same_values, dtype=torch.float64)
    assert same(x, x.reshape(2, 12)) and same(x, x[None]) and same(x.reshape(2, 3, 2, 2), x)  # heads by a view
    assert not same(x, x.transpose(-2, -1).contiguous()) and not same(x, x.reshape(6, 4).T.contiguous())
    assert not same(x.reshape(2, 12), x.reshape(4, 6)) and not same(x > 3, (x > 3).double())


def test_the_calls_recorded_are_the_codes_own_steps():
    """Neither the checks' own calls (building a case, the module's constructor) nor a call that
    raises inside a student's tensor subclass change what the code computes or reach the record."""
    ladder = run_ladder(CHECKS["LayerNorm"], _model_object("LayerNorm"))
    assert len(ladder.calls) == len(ladder.outcomes)
    for calls in ladder.calls:
        assert calls and all(call.line > 0 and "nn.Parameter" not in call.code for call in calls)
        assert [call.what for call in calls][:2] == ["mean", "sub"], calls


def test_a_helper_a_constructor_calls_is_the_constructors_too():
    """Parameters made by a helper that the constructor calls (a lambda that makes each one) are given,
    like the module's inputs: none of the helper's calls is recorded as a step of the code."""
    student = _model_with("LayerNorm", "self.weight = nn.Parameter(torch.ones(self.normalized_shape))  # gamma",
                          "ones = lambda: nn.Parameter(torch.ones(self.normalized_shape))\n        self.weight = ones()")
    ladder = run_ladder(CHECKS["LayerNorm"], student)
    assert ladder.calls[0] and all("lambda" not in call.code for calls in ladder.calls for call in calls), ladder.calls[0]
    assert [call.what for call in ladder.calls[0]][:2] == ["mean", "sub"]


def test_past_its_bounds_the_recorder_keeps_nothing_more():
    """A call after one that was not kept could not say what it took, so nothing after the bound is
    kept: the last results are not there to be named wrongly."""
    x = torch.randn(3, dtype=torch.float64)
    with localise.CallRecorder(most_calls=3) as recorder:
        y = x.exp()
        y = y + 1
        big = torch.zeros(10)  # not past the bound of calls, but past a bound of 8 entries below
        y = y * 2
        y = y - 1
    assert [call.what for call in recorder.calls] == ["exp", "add", "zeros"] and recorder.full
    with localise.CallRecorder(most_elements=8) as recorder:
        y = x.exp()
        big = torch.zeros(10)
        y = y * 2
    assert [call.what for call in recorder.calls] == ["exp"] and recorder.full and big.shape == (10,)


def test_a_sealed_report_quotes_only_lines_and_functions_the_submitted_cells_hold():
    """Once hidden tests ran, the student's code may hold what they were, and a record is the code's
    to write: a sealed finding quotes a recorded line or function name only where the submitted
    cells hold it, and else gives the line's number alone."""
    check = CHECKS["softmax"]
    source = _model_source("softmax").replace("exps = shifted.exp()", "exps = (2 * shifted).exp()")
    ladder = run_ladder(check, _model_with("softmax", "exps = shifted.exp()", "exps = (2 * shifted).exp()"))
    sealed = judging.Sealed(source.splitlines())
    honest = judging.localised(check, ladder, sealed) or ""
    assert "of the cell that defines your `softmax` (`exps = (2 * shifted).exp()" in honest, honest
    forged = decode_ladder(encode_ladder(ladder), check)
    for calls in forged.calls:
        for call in calls:
            call.code, call.within = "hidden = [0.25, 0.5]", "hidden_0_25"
    found = judging.localised(check, forged, sealed) or ""
    assert "hidden" not in found and "of your code is the first" in found, found
    assert "hidden = [0.25, 0.5]" in (judging.localised(check, forged) or "")  # as it is, where nothing is hidden


def test_a_forged_record_of_calls_is_cut_where_it_stops_being_well_formed():
    check = CHECKS["softmax"]
    recorded = encode_ladder(run_ladder(check, _model_with("softmax", "exps = shifted.exp()", "exps = shifted.exp() * 2")))
    assert len(decode_ladder(recorded, check).calls[0]) == len(recorded["calls"][0]) >= 3
    forward = json.loads(json.dumps(recorded))
    forward["calls"][0][1]["takes"] = [2]  # a call that takes a later one
    assert len(decode_ladder(forward, check).calls[0]) == 1
    huge = json.loads(json.dumps(recorded))
    huge["calls"][0][0]["made"] = _encode(torch.zeros(localise.CallRecorder.MOST_ELEMENTS + 1), None)
    assert decode_ladder(huge, check).calls[0] == []
    named = json.loads(json.dumps(recorded))
    named["calls"][0][0]["within"] = "<b>softmax</b>"  # a function's name is an identifier, or none is said
    assert decode_ladder(named, check).calls[0][0].within == ""
    assert decode_ladder(recorded, check).calls[0][0].within == "softmax"
    long_line = json.loads(json.dumps(recorded))
    long_line["calls"][0][0]["code"] = "x" * 10_000
    assert len(decode_ladder(long_line, check).calls[0][0].code) == localise.CallRecorder.MOST_CODE
    too_many = json.loads(json.dumps(recorded))
    too_many["calls"] += too_many["calls"] * len(check.axes.cases())  # more traces than cases that ran
    assert len(decode_ladder(too_many, check).calls) == len(recorded["outcomes"])


# --------------------------------------------------------------------------
# one change that mends the first line that differs, run again by the grader


@pytest.mark.parametrize("name, old, new, said", [
    # a sum without keepdim: the axis of size 1 that keepdim keeps
    ("softmax", "exps.sum(dim=dim, keepdim=True)", "exps.sum(dim=dim)[..., None, :]",
     "given an axis of size 1 at its end"),
    # an axis fixed where the function is given one
    ("softmax", "x.amax(dim=dim, keepdim=True)", "x.amax(dim=-2, keepdim=True)",
     "`.amax(dim=-1, keepdim=True)` in place of `.amax(dim=-2, keepdim=True)`"),
    # the axes of a merge
    ("merge_heads", "x = x.transpose(1, 2)", "x = x.permute(0, 2, 3, 1)", "`.permute(0, 2, 1, 3)` in place of "
                                                                         "`.permute(0, 2, 3, 1)`"),
    # one activation for another, inside a module that names its steps (its lines are recorded too)
    ("FeedForward", "h = torch.relu(self.linear1(x))", "h = torch.sigmoid(self.linear1(x))",
     "Changed in one thing, it makes the reference's values: `.relu()` in place of `.sigmoid()`."),
    # the product that batches, where a raising one is used (said with the line that raised)
    ("project_qkv", "k = x @ w_k", "k = torch.bmm(x, w_k)", "raises; changed in one thing it runs and makes the "
                                                          "reference's values: `… @ …` in place of `.bmm(…)`"),
])
def test_one_change_that_mends_the_first_line_is_found_by_running_it_again(name, old, new, said):
    found = _finding(name, _model_with(name, old, new)) or ""
    assert said in found, found
    assert f"(`{new.strip()}" in found or new.split(" = ")[-1] in found, found  # the line it mends is quoted


def test_one_change_to_an_earlier_line_is_found_by_running_the_lines_after_it_again():
    """A line that raises because of an earlier one (keys transposed in the wrong axes, then
    multiplied), and a line whose one change mends the output only once later calls run again (the
    softmax of transposed scores, transposed back): the grader runs the calls between again with the
    change in place. A change that makes a layout call do nothing (a transpose of an axis of size 1,
    or of the axes it transposes back) is never suggested."""
    found = _finding("scaled_scores", _model_with("scaled_scores", "return q @ k.transpose(-2, -1) / math.sqrt(d_k)",
                                                  "kt = k.transpose(0, 2)\n    return q @ kt / math.sqrt(d_k)")) or ""
    assert "raises; with one change to line 9 (`kt = k.transpose(0, 2)`) it runs and makes the reference's values: " \
           "`.transpose(1, 2)` in place of `.transpose(0, 2)`." in found, found
    found = _finding("scaled_dot_product_attention", _model_with(
        "scaled_dot_product_attention", "weights = scores.softmax(dim=-1)",
        "weights = scores.transpose(-2, -1).softmax(dim=-1).transpose(-2, -1)")) or ""
    assert "With one change to the same line, your output is the reference's: `.softmax(dim=-2)` in place of " \
           "`.softmax(dim=-1)`." in found, found


def _merge_unbinding_positions(x):
    return torch.cat(x.unbind(dim=2), dim=-1)


def _split_stacked_after_positions(x, num_heads):
    return torch.stack(x.split(x.size(-1) // num_heads, dim=-1), dim=2)


def _padding_from_pad_id_up(tokens, pad_id=0):
    return tokens >= pad_id


def _padding_of_the_last_sentence(tokens, pad_id=0):
    return tokens[-1] == pad_id


def _shift_in_the_next_token(tgt, start_token):
    start = tgt.new_full((tgt.size(0), 1), start_token + 1)
    return torch.cat([start, tgt[:, :-1]], dim=1)


def _causal_one_key_short(size):
    return torch.ones(size, size - 1, dtype=torch.bool).triu(diagonal=1)


def _causal_below_the_diagonal(size):
    return torch.ones(size, size, dtype=torch.bool).tril(diagonal=1)


@pytest.mark.parametrize("name, student, said", [
    # a call that makes several tensors (unbind): changed, it changes each of them
    ("merge_heads", _merge_unbinding_positions, "`.unbind(dim=1)` in place of `.unbind(dim=2)`"),
    ("split_heads", _split_stacked_after_positions, "`torch.stack((…, …), dim=1)` in place of `torch.stack((…, …), dim=2)`"),
    # an operation one sign or word away, said as the operator that wrote it
    ("padding_mask", _padding_from_pad_id_up, "`… == 0` in place of `… >= 0`"),
    ("causal_mask", _causal_below_the_diagonal, "`.triu(diagonal=1)` in place of `.tril(diagonal=1)`"),
    # an index that takes one entry of an axis, where the whole axis is meant (said before the shape's finding)
    ("padding_mask", _padding_of_the_last_sentence, "`[:]` in place of `[-1]`"),
    # tensors made from numbers alone, whose one value everywhere matters only through what is made from them
    ("shift_right", _shift_in_the_next_token, "`.new_full((1, 1), 1)` in place of `.new_full((1, 1), 2)`"),
    ("causal_mask", _causal_one_key_short, "`torch.ones(2, 2, dtype=torch.bool)` in place of "
                                           "`torch.ones(2, 1, dtype=torch.bool)`"),
])
def test_one_change_is_found_where_no_line_can_be_said_to_leave_the_references_values(name, student, said):
    """A one-line function whose reference shows no step: no line can be said to be the first that
    leaves the reference's values, yet one change to one call makes the output the reference's."""
    found = _finding(name, student) or ""
    assert "changed in one thing, makes your output the reference's: " + said in found, found


@pytest.mark.parametrize("name, old, new, said", [
    # a change to a line changes each of the calls it makes: every pass of a loop (each block of a row; the
    # mistake shows from the second on, where the sum so far is rescaled)
    ("online_softmax", "run_sum * (run_max - new_max).exp()", "run_sum * (run_max - new_max).exp().pow(2)",
     "`… ** 1` in place of `… ** 2`, each time the line runs"),
    # floor division, said with what it does
    ("alibi_bias", "-8.0 * torch.arange(1, num_heads + 1) / num_heads",
     "-(8 * torch.arange(1, num_heads + 1) // num_heads)", "(floor division, which rounds down)"),
    # a range one position off: as many numbers, from one earlier
    ("alibi_bias", "torch.arange(S - L, S)", "torch.arange(S - L + 1, S + 1)", "as many numbers, counted from"),
    # two calls of one line in each other's place
    ("apply_rope", "c, s = torch.cos(ang), torch.sin(ang)", "s, c = torch.cos(ang), torch.sin(ang)",
     "`.cos()` and `.sin()` swapped, each in the other's place"),
    # the two halves that cat joins, in the other order
    ("apply_rope", "torch.cat((a * c - b * s, a * s + b * c), dim=-1)", "torch.cat((a * s + b * c, a * c - b * s), dim=-1)",
     "with the two tensors it joins (its two halves) in the other order"),
    # a change whose effect runs through a given model (out of the recorder's sight): said where it makes the
    # reference's values, since the calls after it cannot be run again without the model
    ("greedy_decode", "torch.cat([generated, best[:, None]], dim=1)", "torch.cat((best.unsqueeze(-1), generated), 1)",
     "Changed in one thing, it makes the reference's values: `torch.cat((…, …), 1)` with the two tensors it joins"),
    # exclusive or for or, said with what it does
    ("merge_masks", "padding | attn_mask", "torch.logical_xor(padding, attn_mask)",
     "`.logical_or(…)` in place of `.logical_xor(…)` (exclusive or: true where exactly one is)"),
    # a size given an axis of size 1 at its end: a column that cat can join
    ("shift_right", "shifted = tgt.new_full(tgt.shape, start_token)  # (B, T), same dtype and device\n"
                    "    shifted[:, 1:] = tgt[:, :-1]\n    return shifted",
     "start = torch.full((tgt.size(0),), start_token, dtype=tgt.dtype)\n"
     "    return torch.cat((start, tgt[:, :-1]), dim=-1)", ", 1), 1, dtype=torch.int64)` in place of `torch.full(("),
    # an axis too many in a reduction's tuple (where it raises: the same axis twice)
    ("softmax", "exps.sum(dim=dim, keepdim=True)", "exps.sum(dim=(dim, 0), keepdim=True)",
     "`.sum(dim=-1, keepdim=True)` in place of `.sum(dim=(-1, 0), keepdim=True)`"),
])
def test_a_change_is_found_among_more_kinds_of_change(name, old, new, said):
    found = _finding(name, _model_with(name, old, new)) or ""
    assert said in found, found


def test_a_change_that_makes_values_the_reference_makes_elsewhere_is_not_said_where_the_output_gets_no_closer():
    """a * s + b * c for the first half is the reference's second half: values it computes, at the
    wrong place. Run on to the output, that change makes no more of its entries the reference's."""
    student = _model_with("apply_rope", "torch.cat((a * c - b * s, a * s + b * c), dim=-1)",
                          "torch.cat((a * s - b * c, a * c + b * s), dim=-1)")
    found = _finding("apply_rope", student) or ""
    assert "(`return torch.cat((a * s - b * c, a * c + b * s), dim=-1)" in found, found
    assert "`… + …` in place of `… - …`" not in found, found


def test_no_change_is_said_whose_effect_runs_through_a_given_model(monkeypatch):
    """greedy_decode's tokens go through the given model, whose calls are out of the record's sight:
    run again, the calls after a change to the start token still take the model's old scores, and
    a start token of 0 would seem to make the output the reference's. The recorder marks those
    scores, and no change before them is said to make the output right."""
    student = _model_with("greedy_decode", "torch.cat([generated, best[:, None]], dim=1)",
                          "torch.cat((best.unsqueeze(-1), generated), 1)")
    monkeypatch.setattr(localising, "mended", lambda *args, **kwargs: None)  # the change at the line itself aside
    found = _finding("greedy_decode", student) or ""
    assert "(`generated = torch.cat((best.unsqueeze(-1), generated), 1)" in found, found
    assert "in place of `torch.full(" not in found, found


def test_no_change_is_said_where_none_mends_the_line():
    """A mistake that no one change to its call undoes (a half added to the exponentials: numbers that
    are not integers are never changed) gets the line, and no change; one that a change undoes gets it
    (twice the scores: once)."""
    found = _finding("softmax", _model_with("softmax", "exps = shifted.exp()", "exps = shifted.exp() + 0.5")) or ""
    assert "(`exps = shifted.exp() + 0.5" in found and "reference's values: " not in found, found
    found = _finding("softmax", _model_with("softmax", "exps = shifted.exp()", "exps = (2 * shifted).exp()")) or ""
    assert "Changed in one thing, it makes the reference's values: `… * 1` in place of `… * 2`." in found, found


def test_a_recorded_call_is_run_again_only_as_an_operation_the_grader_allows():
    """The record is the code's to write: a call under another name, or arguments that are not the
    data the recorder writes, are never run; a sealed report runs only calls whose numbers are 0 to
    9 (dims), since a number could carry what a hidden test held."""
    check = CHECKS["merge_heads"]
    student = _model_with("merge_heads", "x = x.transpose(1, 2)", "x = x.permute(0, 2, 3, 1)")
    ladder = decode_ladder(encode_ladder(run_ladder(check, student)), check)
    mended = [call for calls in ladder.calls for call in calls if call.what == "permute"]
    assert mended and "in place of" in (judging.localised(check, ladder) or "")
    for forged in ("save", "__reduce_ex__", "_unsafe_view"):
        for call in mended:
            call.what = forged
        assert "reference's values: " not in (judging.localised(check, ladder) or ""), forged
    for call in mended:
        call.what = "permute"
        call.arguments = {"args": [{"call": 0}, {"plain": "x" * 30}], "kwargs": {}}
    assert "reference's values: " not in (judging.localised(check, ladder) or "")
    for call in mended:
        call.arguments = {"args": [{"given": 0}, {"sequence": [{"plain": n} for n in (0, 2, 3, 1)], "kind": "tuple"}],
                          "kwargs": {"out": {"eval": "1"}}}
    assert "reference's values: " not in (judging.localised(check, ladder) or "")
    given = torch.randn(3)  # never written: a recorded inplace=True runs as False, a recorded out= not at all
    relu = localise.Call(given, "relu", arguments={"args": [{"given": 0}], "kwargs": {"inplace": {"plain": True}}})
    assert localising._arguments(relu, [], [given])[1] == {"inplace": False}
    relu.arguments["kwargs"] = {"out": {"given": 0}}
    assert localising._arguments(relu, [], [given]) is None
    long = torch.ones(localise.CallRecorder.MOST_ELEMENTS)  # within a record's bound, and its outer product is not
    assert localising._run("outer", [long, long], {}) is None
    assert localising._run("outer", [long[:3], long[:2]], {}).shape == (3, 2)
    assert localising._run("add", [long[:, None], long[None, :]], {}) is None  # a column broadcast against a row
    assert localising._run("__getitem__", [long, long.long()], {}) is None  # an index that gathers
    sealed = judging.Sealed(_model_source("merge_heads").splitlines())
    small = {"args": [{"given": 0}, {"plain": 1}, {"slice": [{"plain": None}, {"plain": -2}, {"plain": None}]}],
             "kwargs": {"dim": {"plain": 9}}}
    digits = frozenset(range(10))  # a case's own numbers, 0 to 9 among them
    assert sealed.arguments(small, digits) == small
    assert sealed.arguments({"args": [{"given": 0}, {"plain": 10}], "kwargs": {}}, digits) is None
    assert sealed.arguments({"args": [{"given": 0}, {"plain": -16}], "kwargs": {}}, digits | {16}) is not None
    assert sealed.arguments({"args": [{"given": 0}, {"float": "0.25"}], "kwargs": {}}, digits) is None
    assert sealed.arguments({"args": [{"given": 0}, {"float": "12.0"}], "kwargs": {}}, digits) is None
    assert sealed.arguments({"args": [{"float": "2.0"}, {"given": 0}, {"float": "-inf"}], "kwargs": {}}, digits)
    assert sealed.arguments({"args": [{"given": 0}, {"plain": "secret"}], "kwargs": {}}, digits) is None
    assert sealed.arguments({"args": [{"plain": 2}], "kwargs": {"dtype": {"dtype": "bool"}}}, digits) is not None


def test_a_call_that_raised_is_recorded_only_where_it_ended_the_case():
    x = torch.randn(2, 3, dtype=torch.float64)
    with pytest.raises(RuntimeError), localise.CallRecorder() as recorder:
        torch.mm(x, x)
    assert recorder.failed is not None and recorder.failed.what == "mm" and recorder.failed.arguments is not None
    with localise.CallRecorder() as recorder:
        try:
            torch.mm(x, x)
        except RuntimeError:
            pass
        x.exp()  # the code went on: the call that raised did not end it
    assert recorder.failed is None


# --------------------------------------------------------------------------
# a number: how it changes along the axes


def test_a_number_of_another_kind_is_said_so_where_its_value_is_the_references():
    found = _finding("dot_product_variance", _model_with(
        "dot_product_variance", "return (deviations**2).sum() / (scores.numel() - 1)",
        "return ((deviations**2).sum() / (scores.numel() - 1)).tolist()")) or ""
    assert "your variance has the reference's value in every one of them, but is a Python float where the " \
           "reference's is a 0-dim tensor." in found, found


@pytest.mark.parametrize("new, said", [
    ("1 / math.sqrt(2 * d_k) / (var_q * var_k)", "from unit variances to var_q=2, the reference's scale changes ×0.7071 "
                                             "and yours ×0.5 (look at how var_q and var_k enter"),
    ("0.5 / math.sqrt(d_k * var_q * var_k)", "your scale is the reference's times 0.5 (1/2) in every one of them."),
    ("0.125", "your scale is 0.125 in every one of them, whatever the case"),
])
def test_a_wrong_number_is_localised_by_how_it_changes_along_the_axes(new, said):
    found = _finding("score_scale", _model_with("score_scale", "1 / math.sqrt(d_k * var_q * var_k)", new)) or ""
    assert said in found, found
    if "from unit" in said:
        assert "yours changes as the reference's does with d_k=64 (×0.25)" in found, found


# --------------------------------------------------------------------------
# where it runs, what it costs, and what it never changes


def _report(name: str, student, cases, ladder: Ladder | None):
    """The report on the declared cases, run on the CPU as a grading kernel runs them (without the
    meta-device run: the answers' own algorithms make tensors on the CPU, a device bug there)."""
    check = CHECKS[name]
    outcomes = []
    for case in cases:
        try:
            outcomes.append(Outcome(check.call(student, check.build(case), check.spec(case))))
        except Exception as error:  # noqa: BLE001 - the planted mistake's
            outcomes.append(Outcome(error=f"raised {type(error).__name__}: {error}"))
    return judge(check, cases, outcomes, points=1, ladder=ladder)


def test_a_correct_function_costs_no_reference_of_its_ladder(monkeypatch):
    asked = []
    real = judging.judged
    monkeypatch.setattr(judging, "judged", lambda check, case, *a: asked.append(case) or real(check, case, *a))
    garbage = Ladder([Outcome(error="anything")] * len(CHECKS["flash_attention"].axes.cases()))
    report = _report("flash_attention", _model_object("flash_attention"), [dict()], garbage)
    assert report.score == 1 and asked == [dict()]


def test_a_finding_stands_only_where_no_verified_diagnosis_does():
    cases = [dict(causal=True)]
    catalogued = _flash("causal ignored")  # a known mistake: its own hint, and nothing else
    ladder = run_ladder(CHECKS["flash_attention"], catalogued)
    without, with_ladder = _report("flash_attention", catalogued, cases, None), \
        _report("flash_attention", catalogued, cases, ladder)
    assert with_ladder.text == without.text and localising.LEAD not in with_ladder.text
    fresh = _flash_heads_mixed  # no catalogue names it: the finding is its hint
    report = _report("flash_attention", fresh, [dict()], run_ladder(CHECKS["flash_attention"], fresh))
    assert f"hint: {localising.LEAD}" in report.text, report.text
    assert report.score == _report("flash_attention", fresh, [dict()], None).score  # hints never decide points


def test_the_ladder_is_bounded_in_time(monkeypatch):
    monkeypatch.setattr(localise, "TIME_LIMIT_S", 0.05)

    def slow(*args, **kwargs):
        time.sleep(0.03)
        return RIGHT_ROPE(*args, **kwargs)

    ran = run_ladder(CHECKS["apply_rope"], slow)
    assert 1 <= len(ran.outcomes) <= 3 < len(CHECKS["apply_rope"].axes.cases())
    assert judging.localised(CHECKS["apply_rope"], ran) is None  # right so far: the rungs not run say nothing


def test_same_code_same_record_and_same_finding():
    student = _flash("tile indices")
    first, second = run_ladder(CHECKS["flash_attention"], student), run_ladder(CHECKS["flash_attention"], student)
    assert json.dumps(encode_ladder(first)) == json.dumps(encode_ladder(second))
    assert judging.localised(CHECKS["flash_attention"], first) == judging.localised(CHECKS["flash_attention"], second)


def test_the_ladder_leaves_the_random_state_as_it_was():
    def draws(logits, temperature=1.0, top_k=None, top_p=None):
        torch.rand(3)
        random.random()
        return _model_object("next_token_distribution")(logits, temperature, top_k, top_p)

    torch.manual_seed(0)
    random.seed(0)
    run_ladder(CHECKS["next_token_distribution"], draws)
    after = torch.rand(2), random.random()
    torch.manual_seed(0)
    random.seed(0)
    assert torch.equal(after[0], torch.rand(2)) and after[1] == random.random()


def test_the_record_is_data_and_a_malformed_one_localises_nothing():
    check = CHECKS["GroupedQueryAttention"]
    ran = run_ladder(check, _gqa_with("return self.w_o(", "return x + self.w_o("))
    decoded = decode_ladder(json.loads(json.dumps(encode_ladder(ran))), check)
    assert judging.localised(check, decoded) == judging.localised(check, ran) is not None
    assert decode_ladder(None, check) is None and decode_ladder({"outcomes": "?"}, check) is None
    too_many = {"outcomes": [_encode_outcome(Outcome(error="x"), None)] * (len(check.axes.cases()) + 1)}
    assert decode_ladder(too_many, check) is None
    forged_step = dict(encode_ladder(ran), steps={"w_secret": encode_ladder(ran)["steps"]["w_o"]})
    assert "w_secret" not in decode_ladder(forged_step, check).steps


def test_the_grader_reads_the_ladder_from_the_record():
    from attention_checks.probe import probe_all

    check, cases = CHECKS["flash_attention"], [dict()]
    probed = probe_all(check, _flash_heads_mixed, cases, torch.device("cpu"))
    record = dict(check=check.name, forbidden=[], outcomes=[_encode_outcome(o, like) for o, like in
                                                            zip(probed.outcomes, probed.likes)])
    plain = judge_records(check, record, cases, points=1)
    located = judge_records(check, dict(record, localising=encode_ladder(run_ladder(check, _flash_heads_mixed))),
                            cases, points=1)
    assert localising.LEAD not in plain.text and localising.LEAD in located.text
    assert plain.score == located.score
    # what the grader's second run asks the kernel for: the failed name that no ladder localised
    assert plain.unlocalised == "flash_attention" and located.unlocalised == ""
    right = _report("flash_attention", _model_object("flash_attention"), cases, None)
    unfinished = judge(check, cases, [Outcome(error="NotImplementedError", not_implemented=True)], points=1)
    assert right.unlocalised == unfinished.unlocalised == ""


def _recorded_payloads(monkeypatch) -> list[dict]:
    shown: list[dict] = []
    monkeypatch.setattr("IPython.display.display", lambda data, raw: shown.append(data[MIME]))
    return shown


def test_a_kernel_runs_a_ladder_only_for_a_name_that_failed_or_was_asked_for(monkeypatch):
    from attention_checks import registry

    shown = _recorded_payloads(monkeypatch)
    monkeypatch.delenv(localise.LOCALISE_VARIABLE, raising=False)
    check = CHECKS["alibi_bias"]
    check.run(_model_object("alibi_bias"), points=1, cases=[dict()], mode=registry.Mode.RECORD)
    wrong_values = _alibi(lambda h, H: 2 ** (-8 * H / (h + 1)))
    check.run(wrong_values, points=1, cases=[dict()], mode=registry.Mode.RECORD)  # the kernel cannot tell
    crashes = lambda num_heads, L, S=None: torch.zeros(num_heads, L, S or L)[None, None, None, None, 5]  # noqa: E731
    check.run(crashes, points=1, cases=[dict()], mode=registry.Mode.RECORD)
    assert ["localising" in payload for payload in shown] == [False, False, True]
    monkeypatch.setenv(localise.LOCALISE_VARIABLE, "apply_rope,alibi_bias")
    for _ in range(2):  # once per graded object: the same record in a later cell
        check.run(wrong_values, points=1, cases=[dict()], mode=registry.Mode.RECORD)
    assert shown[-1]["localising"] == shown[-2]["localising"]
    assert len(shown[-1]["localising"]["outcomes"]) == len(check.axes.cases())


def test_a_kernel_whose_declared_runs_kept_state_runs_no_ladder(monkeypatch):
    from attention_checks import registry

    shown = _recorded_payloads(monkeypatch)
    monkeypatch.setenv(localise.LOCALISE_VARIABLE, "all")

    class Kept(_CacheKeepingTheFirstUpdate):
        shared: list = []

        def update(self, k, v):
            Kept.shared.append(k)
            return super().update(k, v)

    CHECKS["KVCache"].run(Kept, points=1, cases=[dict()], mode=registry.Mode.RECORD)
    assert "localising" not in shown[0] and len(Kept.shared) == 3  # the declared case's three updates only


def test_a_name_without_a_ladder_records_none():
    unladdered = [name for name, check in CHECKS.items() if check.axes is None]
    assert unladdered and run_ladder(CHECKS[unladdered[0]], lambda *a, **k: None).outcomes == []


def test_a_catalogued_diagnosis_matched_by_chance_is_refuted_by_the_cases_it_contradicts():
    """Issue 59's example: RoPE frequencies indexed from one were said to ignore the positions. On the
    hidden case of one position and one pair of features, the rotation by position / base is within
    float32's tolerance of none, as code that ignores the positions gives; every other failing case,
    where that code gives other values than this one, withdraws the diagnosis, and so does the
    ladder (at positions 0, 1, ignoring them is right, and this code is wrong there)."""
    from_one = _rope(lambda base, half: base ** (-torch.arange(1, half + 1, dtype=torch.float64) / half))
    ignores = "You rotate by 0, 1, ..., L-1 whatever the positions"
    cases = SourceNotebook("10-positions-and-generation").cases("test_apply_rope_hidden")
    by_chance = [case for case in cases if case.get("L") == 1 and case.get("D") == 2]
    check = CHECKS["apply_rope"]
    assert by_chance and ignores in _report("apply_rope", from_one, by_chance, None).text
    assert ignores not in _report("apply_rope", from_one, cases, None).text
    assert judging.refuted_by_ladder(check, None) == set()
    assert any(ignores in hint for hint in judging.refuted_by_ladder(check, run_ladder(check, from_one)))
    located = _report("apply_rope", from_one, cases, run_ladder(check, from_one)).text
    assert ignores not in located and localising.LEAD in located, located


def test_a_diagnosis_with_several_forms_stands_where_one_of_them_gives_the_codes_values():
    """Masks taken as "keep" masks (tests/corpus/05-masks/attention_inverted): the catalogue's forms
    of an inverted mask invert one mask or their union, and on each wrong rung one of them gives the
    code's values (rows with every key masked give NaN in both), so the ladder keeps the diagnosis
    that the student's own test names."""
    (entry,) = [e for e in load_corpus("05-masks", cli=True) if e.name == "attention_inverted"]
    student = SourceNotebook("05-masks").student(entry.cells)["masked_attention"]
    check = CHECKS["masked_attention"]
    refuted = judging.refuted_by_ladder(check, run_ladder(check, student))
    assert not any(entry.hint in hint for hint in refuted), refuted


def test_a_diagnosis_must_reproduce_the_code_on_every_localising_case():
    """D taken from the batch axis (a fresh mistake): in a batch of one the scores are unscaled, as a
    catalogued mistake says, but not in a batch of three, so the ladder withdraws that diagnosis
    and the finding stands instead (the declared cases, most of them batches of more than one,
    withdraw it too: refuted_mistakes)."""
    import math

    def by_batch(x):
        weights = torch.softmax(x @ x.transpose(-2, -1) / math.sqrt(x.size(0)), dim=-1)
        return weights @ x, weights

    check = CHECKS["simple_self_attention"]
    cases = SourceNotebook("01-self-attention").cases(next(gid for gid, cell in SourceNotebook(
        "01-self-attention").tests.items() if "check_simple_self_attention(" in cell.source))
    ladder = run_ladder(check, by_batch)
    withdrawn = judging.refuted_by_ladder(check, ladder)
    plain = _report("simple_self_attention", by_batch, cases, None).text
    located = _report("simple_self_attention", by_batch, cases, ladder).text
    assert withdrawn and not any(hint in plain for hint in withdrawn), plain
    assert not any(hint in located for hint in withdrawn) and localising.LEAD in located, located


@pytest.mark.parametrize("corpus, name, draws", [
    ("corpus_fresh", "greedy_prepends", False),  # each token put in front: deterministic, not the argmax chain
    ("corpus", "greedy_multinomial", True),
    ("corpus", "greedy_top3_sampling", True),
])
def test_a_claim_of_random_draws_stands_only_where_another_seed_changes_the_outputs(corpus, name, draws):
    """"Are they sampled?" fits any plausible tokens that are not the argmax chain, which one run
    cannot tell from code that draws nothing. The greedy ladder's last rung draws the random numbers
    from another seed: code that gives the same tokens draws none, and the claim is withdrawn (the
    finding stands instead); a sampler gives others, and keeps it."""
    from benchmarks.fresh_mistakes import FRESH
    from classroom import CORPUS

    (entry,) = [e for e in load_corpus("08-decoder", cli=True, corpus=FRESH if corpus == "corpus_fresh" else CORPUS)
                if e.name == name]
    notebook = SourceNotebook("08-decoder")
    student = notebook.student(entry.cells)["greedy_decode"]
    check = CHECKS["greedy_decode"]
    ladder = run_ladder(check, student)
    assert judging.drew_nothing(check, ladder, *check.axes.reseeded()) is not draws
    cases = notebook.cases("test_greedy_decode")
    plain, located = _report("greedy_decode", student, cases, None).text, \
        _report("greedy_decode", student, cases, ladder).text
    assert "are they sampled" in plain  # what one run shows fits both
    assert ("are they sampled" in located) is draws and (localising.LEAD in located) is not draws, located
