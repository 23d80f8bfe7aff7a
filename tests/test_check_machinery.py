"""The machinery every declared check shares, exercised on 03-qkv's checks: scores and
partial credit as nbgrader reads them, forbidden calls, student exceptions and noise,
tolerances, dtype and device, and the three places a check runs (the student's notebook,
a grading kernel, the grader)."""
from __future__ import annotations

import contextlib
import functools
import importlib
import io
import json
import logging
import math
import os
import re
import sys
import warnings

import nbformat
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from nbformat.v4 import new_output

from attention_checks import TOLERANCES, CheckFailed, PartialCredit
from attention_checks.answers import positions_generation as answers_10
from attention_checks.answers.judging import compare, judge, judge_records
from attention_checks.core import PRIVATE_IMPLEMENTATIONS, WATCH_SWITCHED_OFF, ForbiddenCalls, quiet
from attention_checks.inputs import keep_mask
from attention_checks.probe import _OnMeta, probe_all
from attention_checks.qkv import FORBIDDEN_SDPA, check_project_qkv, check_scaled_dot_product_attention
from attention_checks.record import MIME, Outcome, _encode_outcome
from autograder.grading.judge import Replay
from classroom.notebook import SourceNotebook, check_report, tf32

NB = SourceNotebook("03-qkv")
CPU = torch.device("cpu")
SDPA = check_scaled_dot_product_attention
SMALL = [dict(), dict(mask="bool", L=4, S=6), dict(is_causal=True)]


def _reference_sdpa():
    return NB.student()["scaled_dot_product_attention"]


def _sdpa_tf32(query, key, value, attn_mask=None, is_causal=False, scale=None):
    mm = (lambda a, b: tf32(a) @ tf32(b)) if query.dtype == torch.float32 else torch.matmul
    L, S = query.size(-2), key.size(-2)
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = mm(query, key.transpose(-2, -1)) * scale
    if is_causal:
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool, device=query.device).tril(), float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    weights = scores.softmax(-1)
    return mm(weights, value), weights


def _recorded(check, fn, cases) -> dict:
    """The record a grading kernel displays for one check call."""
    probed = probe_all(check, fn, cases, CPU)
    return dict(check=check.name, forbidden=probed.forbidden,
                outcomes=[_encode_outcome(o, like) for o, like in zip(probed.outcomes, probed.likes)])


# --------------------------------------------------------------------------
# scores as nbgrader reads them


@pytest.mark.parametrize("score, points", [(1.5, 2), (0.33, 1), (0.08, 1), (8.99, 9)])
def test_partial_credit_is_read_by_nbgrader(score, points):
    from IPython.core.formatters import PlainTextFormatter
    from nbgrader.utils import determine_grade

    credit = PartialCredit(score, points)
    text = PlainTextFormatter()(credit)
    assert text == repr(credit) == repr(score) and float(text) == score
    assert f"{score:g} / {points:g}" in credit._repr_html_()
    cell = nbformat.from_dict(dict(
        cell_type="code", source="", metadata={"nbgrader": {"grade": True, "solution": False, "points": points}},
        outputs=[new_output("stream", name="stdout", text="report\n"),
                 new_output("execute_result", data={"text/plain": text}, execution_count=1)],
    ))
    assert determine_grade(cell) == (score, points)


def _test_cell(outputs: list, metadata: dict | None = None) -> nbformat.NotebookNode:
    """A test cell of SDPA on SMALL, as the executor leaves it: ``outputs`` from the kernel."""
    return nbformat.from_dict(dict(
        cell_type="code", execution_count=1, outputs=outputs,
        source=f"check_scaled_dot_product_attention(scaled_dot_product_attention, points=2, cases={SMALL!r})",
        metadata={"nbgrader": {"grade": True, "solution": False, "points": 2, "grade_id": "t"}, **(metadata or {})}))


def _first_case_wrong(query, key, value, **kwargs):
    output, weights = _reference_sdpa()(query, key, value, **kwargs)
    return (output + 1, weights) if query.size(-2) == 5 and "attn_mask" not in kwargs else (output, weights)


@pytest.mark.parametrize("student", [_reference_sdpa, lambda: _first_case_wrong, lambda: lambda q, k, v, **kw: None],
                         ids=["full", "partial", "zero"])
def test_the_graders_verdict_is_data_and_ignores_what_the_kernel_printed(student, request):
    """JudgeTests writes its verdict (score and message) into the test cell's metadata, where the
    gradebook's score and results.json's message come from, never from the outputs, where a
    kernel can print anything (here: a result of 2.0 points, beside a verdict of its own)."""
    from autograder.grading.judge import JudgeTests
    from autograder.results import VERDICT, CellVerdict

    name = request.node.callspec.id
    record = _recorded(SDPA, student(), SMALL)
    assert judge_records(SDPA, record, SMALL, points=2).score == {"full": 2, "partial": 1.5, "zero": 0}[name]
    nb = nbformat.v4.new_notebook(cells=[_test_cell(
        [new_output("display_data", data={MIME: record}), new_output("execute_result", data={"text/plain": "2.0"})],
        metadata={VERDICT: {"score": 2, "points": 2, "message": "all good"}})])
    JudgeTests().preprocess(nb, {})
    expected = judge_records(SDPA, record, SMALL, points=2)
    verdict = CellVerdict.of(nb.cells[0])
    assert (verdict.score, verdict.points, verdict.message) == (expected.score, 2, expected.text)
    # the outputs show the verdict as the check shows it in the kernel, and nothing the kernel sent
    kinds = [o.output_type for o in nb.cells[0].outputs]
    assert kinds == {2: ["stream"], 0: ["error"]}.get(verdict.score, ["stream", "execute_result"]), kinds
    assert MIME not in json.dumps(nb.cells[0].outputs) and "'2.0'" not in repr(nb.cells[0].outputs)


def _solution_cell(source: str, grade_id: str = "sdpa") -> nbformat.NotebookNode:
    return nbformat.from_dict(dict(cell_type="code", execution_count=1, outputs=[], source=source, metadata={
        "nbgrader": {"grade": False, "solution": True, "locked": False, "grade_id": grade_id}}))


BROKEN_SDPA = """import torch

def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    scores = query @ key.transpose(-2, -1)
    for row in scores:
        pass
      return scores
"""


def test_a_cell_that_does_not_compile_is_said_plainly_in_every_test_that_needs_it():
    """Issue 59, item 4: a solution cell with an IndentationError defines nothing, so the kernel
    records nothing for its test; the verdict says which cell does not run and at which of its
    lines, and never wonders whether the check was changed."""
    from autograder.grading.judge import JudgeTests
    from autograder.instructor.verdicts import read_verdict
    from autograder.results import CellVerdict

    nb = nbformat.v4.new_notebook(cells=[_solution_cell(BROKEN_SDPA), _test_cell([]), _test_cell([])])
    JudgeTests().preprocess(nb, {})
    said = "your cell `scaled_dot_product_attention` does not run: IndentationError at line 7"
    for test in nb.cells[1:]:
        verdict = CellVerdict.of(test)
        assert verdict.score == 0 and said in verdict.message, verdict.message
        assert "was the check changed" not in verdict.message and "tamper" not in verdict.message
        # what the LMS comment and the class report read of it (autograder/instructor/verdicts.py)
        assert said.lower() in read_verdict(verdict.message).summary.lower(), read_verdict(verdict.message)
    # a check whose object is the student's, defined elsewhere, that raised NameError for the broken name
    cells = [_solution_cell(BROKEN_SDPA), _solution_cell("x = (", grade_id="helper_cell")]
    from autograder.grading.judge import CellsThatDoNotRun

    broken = CellsThatDoNotRun(cells)
    assert broken.defining("scaled_dot_product_attention") == said and broken.defining("softmax") is None
    assert broken.all() == {"scaled_dot_product_attention": said,
                            "x": "your cell `x` does not run: SyntaxError at line 1"}
    record = _recorded(SDPA, lambda *a, **k: scaled_dot_product_attention(*a, **k), SMALL[:1])  # noqa: F821
    text = judge_records(SDPA, record, SMALL[:1], points=2, not_run=broken.all()).text
    assert "raised NameError" in text and f"hint: Y{said[1:]}, so `scaled_dot_product_attention` does not exist" \
        in text, text


def test_a_missing_record_without_a_broken_cell_suspects_nobody():
    text = judge_records(SDPA, None, SMALL, points=2).text
    assert "no result was recorded" in text and "changed" not in text and "tamper" not in text, text


def test_a_test_cell_the_executor_stopped_earns_nothing_whatever_it_recorded():
    from autograder.grading.judge import JudgeTests
    from autograder.results import OBSERVED, CellVerdict

    record = _recorded(SDPA, _reference_sdpa(), SMALL)
    nb = nbformat.v4.new_notebook(cells=[_test_cell([new_output("display_data", data={MIME: record})],
                                                    metadata={OBSERVED: "cell_timeout"})])
    JudgeTests().preprocess(nb, {})
    verdict = CellVerdict.of(nb.cells[0])
    assert verdict.score == 0 and verdict.message.startswith("CellTimeoutError: the cell did not finish in time")
    assert "all 3 cases pass" in verdict.message


# --------------------------------------------------------------------------
# once a kernel has run hidden tests, reports quote nothing the student's code chose freely

LEAK = "hidden_sdpa_cases = [dict(L=7, seed=4242)]"  # what a hook could have kept of a hidden test
LEAK_CODES = [ord(c) for c in LEAK]


def _leaking_outcomes() -> list[Outcome]:
    """The three SMALL cases of a student's code that says LEAK every way a report quotes it: an
    exception's type, message and the line it "raised at"; a shape; how far its values are off."""
    off = (torch.full((2, 5, 8), LEAK_CODES[0] + 0.123), torch.zeros(2, 5, 5))
    return [Outcome(error=f"raised Hidden_sdpa_cases: {LEAK}\n      at: {LEAK}"),
            Outcome(value=(torch.zeros(0, *LEAK_CODES[:8]), None)),
            Outcome(value=off)]


def test_sealed_reports_quote_nothing_the_students_code_chose():
    from attention_checks.answers.judging import Sealed

    outcomes = _leaking_outcomes()
    as_is = judge(SDPA, SMALL, outcomes, points=3, shown=3).text
    assert "hidden_sdpa_cases" in as_is and ", ".join(map(str, LEAK_CODES[1:8])) in as_is  # the leak, quoted
    sealed = judge(SDPA, SMALL, outcomes, points=3, shown=3, quoting=Sealed([])).text
    assert "hidden_sdpa" not in sealed.lower() and "4242" not in sealed and "Hidden" not in sealed, sealed
    assert not {str(c) for c in LEAK_CODES if c > 9} & set(re.findall(r"\b\d+\b", sealed)) and "123" not in sealed, sealed
    # what stays: the grader's own words, the case's own sizes, each result's structure, rounded numbers
    assert "raised an exception" in sealed and "shape (0, ?, ?, ?, ?, ?, ?, ?, ?), expected (2, 4, 8)" in sealed, sealed
    assert "max abs error" in sealed and "3 of 3 cases fail" in sealed, sealed


def test_sealed_reports_keep_pythons_and_pytorchs_exceptions_and_the_students_own_lines():
    from attention_checks.answers.judging import Sealed

    crash = Outcome(error="raised RuntimeError: mat1 and mat2 shapes cannot be multiplied (10x4 and 8x8)\n"
                          "      at: output = query @ key_weights")
    forged_line = Outcome(error="raised ValueError: anything\n      at: secret = 'kept from a hidden test'")
    sealed = judge(SDPA, SMALL[:2], [crash, forged_line], points=2,
                   quoting=Sealed(["def scaled_dot_product_attention(query, key, value):",
                                   "    output = query @ key_weights"])).text
    # PyTorch's own message, its sizes as the case's own numbers (10 is none of them)
    assert "raised RuntimeError: mat1 and mat2 shapes cannot be multiplied (?x4 and 8x8)\n" in sealed, sealed
    assert "at: output = query @ key_weights" in sealed, sealed
    # the hint read off the message stays; it names a transpose only where the line makes one (issue 59)
    assert "check which tensors, of which shapes, this line multiplies" in sealed and "transpose" not in sealed
    assert "raised ValueError" in sealed and "secret" not in sealed and "anything" not in sealed, sealed
    assert "10x4" not in sealed


def test_every_exception_a_check_raises_is_one_a_sealed_report_may_name():
    """Sealed reports name an exception's type only when Python, PyTorch or the course defines it
    (known_exceptions, which reads core and modules): an exception type declared in an
    assignment's module would be quoted as "an exception"."""
    import importlib
    import inspect

    from attention_checks.answers.judging import known_exceptions
    from attention_checks.registry import check_modules

    declared = {name for module in map(importlib.import_module, check_modules())
                for name, value in vars(module).items()
                if inspect.isclass(value) and issubclass(value, BaseException)}
    assert {"NotBlockwise", "NotStreamed"} <= declared  # what 09's checks raise
    assert declared <= known_exceptions(), declared - known_exceptions()


def test_sealed_reports_quote_pytorchs_messages_only_as_pytorch_words_them():
    from attention_checks.answers.judging import Sealed

    def shown(message: str, line: str = "out = torch.cat([a, b], dim=-1)") -> str:
        outcome = Outcome(error=f"raised RuntimeError: {message}\n      at: {line}")
        return judge(SDPA, SMALL[:1], [outcome], points=1, quoting=Sealed([line])).text.splitlines()[3].strip()

    cat = "Sizes of tensors must match except in dimension 3. Expected size 3 but got size 1 for tensor number 1 in the list."
    assert shown(cat) == f"raised RuntimeError: {cat}"
    # the numbers a form holds are sizes: quoted as the case's own numbers, others as ?
    assert shown(cat.replace("size 3", "size 104")) == f"raised RuntimeError: {cat.replace('size 3', 'size ?')}"
    assert shown("expected m1 and m2 to have the same dtype, but got: double != float").endswith("double != float")
    # a form with free words in it, a form with something after it, the student's own raise: sealed
    assert shown("expected m1 and m2 to have the same dtype, but got: secret != float") == "raised RuntimeError"
    assert shown(cat + " kept from a hidden test") == "raised RuntimeError"
    assert shown(cat, line="raise RuntimeError(message)") == "raised RuntimeError"


def test_sealed_token_reports_show_both_rows_with_the_students_tokens_as_sizes():
    from attention_checks.answers.judging import Sealed

    expected = torch.tensor([[1, 2, 3, 4]])
    got = torch.tensor([[104, 5, 100, 4]])
    as_is = compare(got, expected, torch.float32, "cpu")
    sealed = compare(got, expected, torch.float32, "cpu", Sealed([]), frozenset(range(10)))
    assert as_is.details[1].split() == ["got", "104", "5", "100", "4"], as_is.details
    shown = "\n".join([sealed.line, *sealed.details])
    assert "104" not in shown and "100" not in shown, shown
    assert sealed.details[1].split() == ["got", "?", "5", "?", "4"], shown  # the case's own numbers only
    assert "tokens differ at 3 of 4 positions" in sealed.line
    # aligned: each token of the student's row stands under the expected one, the ^ under both
    columns = [[m.end() for m in re.finditer(r"\S+", line)][-4:] for line in sealed.details]
    assert columns[0] == columns[1] and columns[2] == [columns[0][i] for i in (0, 1, 2)], sealed.details


def test_long_token_rows_are_shown_in_blocks_that_stay_aligned():
    expected = torch.arange(85) % 7
    got = expected.clone()
    got[[3, 30, 70]] = 9
    verdict = compare(got, expected, torch.float32, "cpu")
    # the blocks of 20 positions where they differ: 0-19 and 20-39, not 40-59; 60-79 left out
    assert len(verdict.details) == 7 and verdict.details[3].split()[:4] == ["from", "20", "expected", "6"], \
        verdict.details
    assert verdict.details[4].split()[1:] == [str(v) for v in got[20:40].tolist()], verdict.details
    assert verdict.details[5].split() == ["^"], verdict.details
    assert "1 more block(s) of 20 positions that differ" in verdict.details[6], verdict.details


def test_verdicts_are_sealed_from_the_first_cell_that_holds_hidden_tests():
    """The kernel's words are quoted until a hidden test runs; from that cell on, in the order the
    kernel ran the cells, they are not, in hidden and visible test cells alike."""
    from autograder.grading.judge import JudgeTests
    from autograder.results import CellVerdict

    def crashing(words):
        return [new_output("display_data", data={MIME: dict(
            check=SDPA.name, forbidden=[], outcomes=[_encode_outcome(Outcome(error=f"raised ValueError: {words}"),
                                                                     torch.zeros(1)) for _ in SMALL])})]

    hidden = _test_cell(crashing("said in the hidden test"))
    hidden.source = f"### BEGIN HIDDEN TESTS\n{hidden.source}\n### END HIDDEN TESTS"
    nb = nbformat.v4.new_notebook(cells=[_test_cell(crashing("said before")), hidden,
                                         _test_cell(crashing("said after"))])
    JudgeTests().preprocess(nb, {})
    before, during, after = (CellVerdict.of(cell).message for cell in nb.cells)
    assert "raised ValueError: said before" in before
    assert "raised ValueError\n" in during and "said" not in during, during
    assert "raised ValueError\n" in after and "said" not in after, after


def test_an_output_that_took_no_work_earns_nothing_for_its_shape():
    """The right shape earns a quarter of a case where the values are wrong, but not for an input
    handed back as it was, nor for one value everywhere (a stub's zeros): neither computes anything
    (issue 58). An output computed from the inputs keeps its quarter."""
    reference = _reference_sdpa()
    cases = [dict(L=3, S=3, E=4, Ev=4)]
    handed_back = lambda q, k, v, **kw: (q, reference(q, k, v, **kw)[1])  # noqa: E731
    zeros = lambda q, k, v, **kw: tuple(torch.zeros_like(t) for t in reference(q, k, v, **kw))  # noqa: E731
    doubled = lambda q, k, v, **kw: tuple(2 * t for t in reference(q, k, v, **kw))  # noqa: E731
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert SDPA(handed_back, points=2, cases=cases, device=CPU) == 1.0  # the weights alone
    assert "that is the input query as it was given, which earns nothing for its shape" in out.getvalue()
    with pytest.raises(CheckFailed, match="one value everywhere, which earns nothing for its shape"):
        SDPA(zeros, points=2, cases=cases, device=CPU)
    with contextlib.redirect_stdout(io.StringIO()):
        assert SDPA(doubled, points=2, cases=cases, device=CPU) == 0.5
    # every query's output the values' mean (computed from them: its quarter stays) and uniform weights
    # (one value everywhere: theirs goes)
    uniform = lambda q, k, v, **kw: (v.mean(-2, keepdim=True).expand_as(v), torch.full_like(  # noqa: E731
        reference(q, k, v, **kw)[1], 1 / 3))
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert SDPA(uniform, points=2, cases=cases, device=CPU) == 0.25
    assert "query as it was given" not in out.getvalue()


def test_scores_follow_the_fraction_of_cases():
    reference = _reference_sdpa()
    cases = [dict(L=3), dict(L=4), dict(L=5), dict(L=6)]
    answers = iter(range(4))

    def mixed(query, key, value, **kwargs):
        output, weights = reference(query, key, value, **kwargs)
        n = next(answers)
        return [(output, weights), (output, weights), (output * 2, weights * 2), (output.double(), weights.double())][n]

    with contextlib.redirect_stdout(io.StringIO()) as out:
        score = SDPA(mixed, points=2, cases=cases, device=CPU)
    # per case: 1, 1, 0.25 (right structure, wrong values), 0.75 (wrong dtype, right values)
    assert isinstance(score, PartialCredit) and score == round(2 * 3.0 / 4, 2)
    assert "2 of 4 cases fail" in out.getvalue() and "dtype float64, expected float32" in out.getvalue()

    many = [dict(L=2, seed=i) for i in range(200)]
    calls = iter(range(200))
    one_wrong = lambda q, k, v, **kw: (lambda o, w: (o * 2, w) if next(calls) == 199 else (o, w))(*reference(q, k, v, **kw))  # noqa: E731
    with contextlib.redirect_stdout(io.StringIO()):
        assert SDPA(one_wrong, points=1, cases=many, device=CPU) == 0.99  # never full points for a failing check
    with pytest.raises(CheckFailed, match="0 / 2"):
        SDPA(lambda *a, **k: [1, 2], points=2, cases=cases, device=CPU)
    with pytest.raises(CheckFailed, match="expected a function"):
        SDPA(None, points=2, cases=cases, device=CPU)


def test_check_failed_renders_without_frames():
    lines = CheckFailed("first line\nsecond line")._render_traceback_()
    assert len(lines) == 2 and lines[0].endswith("first line") and "File" not in "".join(lines)


# --------------------------------------------------------------------------
# forbidden calls, student exceptions, printing


@pytest.mark.parametrize("how", ["F", "alias", "torch._C._nn", "aten packet", "aten overload", "swallowed"])
def test_forbidden_api_is_caught_however_it_is_called(how):
    from torch.nn.functional import scaled_dot_product_attention as alias

    reference = _reference_sdpa()
    call = {
        "F": F.scaled_dot_product_attention,
        "alias": alias,
        "torch._C._nn": torch._C._nn.scaled_dot_product_attention,
        "aten packet": torch.ops.aten.scaled_dot_product_attention,
        "aten overload": torch.ops.aten.scaled_dot_product_attention.default,
        "swallowed": F.scaled_dot_product_attention,
    }[how]

    def cheat(query, key, value, attn_mask=None, is_causal=False, scale=None):
        output, weights = reference(query, key, value, attn_mask, is_causal, scale)
        try:
            fast = call(query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale)
            if how == "swallowed":
                raise RuntimeError("hide it")
            return fast, weights
        except RuntimeError:
            return output, weights

    with pytest.raises(CheckFailed, match="calls F.scaled_dot_product_attention.*earns no points"):
        SDPA(cheat, points=2, cases=SMALL, device=CPU)


def test_forbidden_detector_ignores_other_calls():
    with ForbiddenCalls(FORBIDDEN_SDPA) as guard:
        x = torch.randn(2, 3)
        (x @ x.T).softmax(-1)
        F.softmax(x, -1)
    assert guard.seen == []


# PyTorch's private implementations and methods borrowed from a forbidden class (issue 24, class 1):
# reached by names no scan can read, so the kernel watches the code that runs


def _hidden_module(reversed_name: str):
    """A module of torch found by a name built at run time (the scan cannot fold it)."""
    return importlib.import_module("torch." + "".join(reversed(reversed_name)))


def test_private_implementations_earn_nothing_however_they_are_named():
    decompositions = _hidden_module("snoitisopmoced.pmoced_")
    reference = _reference_sdpa()

    def through_decompositions(query, key, value, attn_mask=None, is_causal=False, scale=None):
        found = vars(decompositions)["scaled_dot_product_flash_attention_for_cpu"]
        output = found(query, key, value, 0.0, is_causal, attn_mask=attn_mask, scale=scale)[0]
        return output, reference(query, key, value, attn_mask, is_causal, scale)[1]

    with pytest.raises(CheckFailed, match="calls PyTorch's private implementations.*earns no points"):
        SDPA(through_decompositions, points=2, cases=SMALL[:1], device=CPU)
    # the honest twin of the attack, and the meta run (whose kernels PyTorch runs in those modules)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        SDPA(reference, points=2, cases=SMALL, device=CPU)
    assert "all 3 cases pass (2 / 2 points)" in out.getvalue(), out.getvalue()


def test_a_library_handed_a_private_implementation_is_still_the_students_call():
    """The caller of the private code is functools (C) or the student's frame, never torch."""
    refs = _hidden_module("sfer_")
    softmax = functools.partial(vars(refs)["softmax"], dim=-1)
    with ForbiddenCalls({}) as guard:
        softmax(torch.randn(2, 3))
    assert guard.seen == [PRIVATE_IMPLEMENTATIONS]


def test_a_private_implementation_handed_to_pytorch_to_call_is_still_the_students_call():
    """torch.vmap calls what it is given from Python: up through PyTorch's own frames, each calling
    the next directly, the caller is the student's code."""
    decompositions = _hidden_module("snoitisopmoced.pmoced_")
    softmax = vars(decompositions)["_softmax"]
    with ForbiddenCalls({}) as guard:
        out = torch.vmap(softmax, in_dims=(0, None, None))(torch.randn(2, 3, 4), -1, False)
    assert guard.seen == [PRIVATE_IMPLEMENTATIONS] and torch.allclose(out.sum(-1), torch.ones(2, 3))
    with ForbiddenCalls({}) as guard:  # through C (functools), on vmap's batched tensors
        out = torch.vmap(functools.partial(softmax, dim=-1, half_to_float=False))(torch.randn(2, 3, 4))
    assert guard.seen == [PRIVATE_IMPLEMENTATIONS] and torch.allclose(out.sum(-1), torch.ones(2, 3))
    with ForbiddenCalls({}) as guard:  # the same, with a function of the student's own
        torch.vmap(lambda row: (row - row.max()).exp() / (row - row.max()).exp().sum())(torch.randn(2, 3))
    assert guard.seen == []


def test_a_private_implementation_registered_as_an_operators_kernel_is_the_students_call():
    """PyTorch's dispatcher runs, from C, a Python kernel the notebook registered (torch.library)
    when PyTorch's own Python calls the operator: one of the notebook's own through torch.ops, or
    a public one through F.sigmoid. PyTorch's own such kernels compute with shapes only (below)."""
    softmax = functools.partial(vars(_hidden_module("sfer_"))["softmax"], dim=-1)
    own, public = torch.library.Library("machinery_test", "DEF"), torch.library.Library("aten", "IMPL")
    try:
        own.define("soft(Tensor x) -> Tensor")
        own.impl("soft", softmax, "CompositeImplicitAutograd")
        with ForbiddenCalls({}) as guard:
            out = torch.ops.machinery_test.soft(torch.randn(2, 3))
        assert guard.seen == [PRIVATE_IMPLEMENTATIONS] and torch.allclose(out.sum(-1), torch.ones(2))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PyTorch warns that a kernel is overridden: the point
            public.impl("sigmoid", softmax, "CPU")
        with ForbiddenCalls({}) as guard:
            out = F.sigmoid(torch.randn(2, 3))
        assert guard.seen == [PRIVATE_IMPLEMENTATIONS] and torch.allclose(out.sum(-1), torch.ones(2))
    finally:
        own._destroy()
        public._destroy()
    with ForbiddenCalls({}) as guard:  # the honest twin: PyTorch's own sigmoid again
        out = F.sigmoid(torch.zeros(2, 3))
    assert guard.seen == [] and torch.equal(out, torch.full((2, 3), 0.5))


def test_pytorchs_own_kernels_for_meta_and_fake_tensors_are_no_ones_use():
    """A student may count a model's costs on the meta device, where FlopCounterMode runs each
    operator from PyTorch's Python, or with fake tensors: PyTorch's Python kernels compute shapes
    there, and no data (tests/corpus/04-multi-head/loops_float64_prints.py)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils.flop_counter import FlopCounterMode

    with ForbiddenCalls({}) as guard:
        with torch.device("meta"):
            x, w = torch.empty(1, 4, 8), torch.empty(24, 8)
        with FlopCounterMode(display=False) as counter:
            (x @ w.T).chunk(3, -1)[0].softmax(-1)
        with FakeTensorMode():
            torch.empty(2, 3).softmax(-1) @ torch.empty(3, 4)
    assert guard.seen == [] and counter.get_total_flops() == 2 * 4 * 8 * 24

    class SaysMeta(torch.Tensor):  # real data, which a subclass says is meta
        is_meta = property(lambda self: True)
        device = property(lambda self: torch.device("meta"))

    softmax = functools.partial(vars(_hidden_module("sfer_"))["softmax"], dim=-1)
    with ForbiddenCalls({}) as guard:
        softmax(torch.randn(2, 3).as_subclass(SaysMeta))
    assert guard.seen == [PRIVATE_IMPLEMENTATIONS]


STAND_IN_TORCH = {  # a package in PyTorch's place, its private folder beside its public code
    "standin_torch/__init__.py": "",
    "standin_torch/_refs/__init__.py": "",
    "standin_torch/_refs/helpers.py": "def register(f):\n    return f\n\ndef softmax(x):\n    return x.softmax(-1)\n",
    # imported on a first use, as torch imports torch._dynamo: top-level code that registers
    # (and a class, whose body the module's code runs through C)
    "standin_torch/_refs/lazy.py": "from standin_torch._refs.helpers import register\n\n@register\ndef kernel():\n    pass\n"
                                   "\n\nclass State:\n    count = 0\n",
    "standin_torch/public.py": "def first_use(x):\n    import standin_torch._refs.lazy\n    return x\n",
    # the student's own module, whose top-level code computes with a private implementation
    "students_module.py": "import torch\nfrom standin_torch._refs.helpers import softmax\nOUT = softmax(torch.ones(3))\n",
}


@pytest.fixture
def stand_in_torch(tmp_path, monkeypatch):
    """PyTorch's folders, as the watch knows them, pointed at STAND_IN_TORCH."""
    import attention_checks.core as core

    for name, text in STAND_IN_TORCH.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(core, "_TORCH_DIR", f"{tmp_path / 'standin_torch'}{os.sep}")
    monkeypatch.setattr(core, "_PRIVATE_DIRS", (f"{tmp_path / 'standin_torch' / '_refs'}{os.sep}",))
    yield
    for module in [m for m in sys.modules if m.startswith(("standin_torch", "students_module"))]:
        del sys.modules[module]


def test_pytorch_importing_its_private_modules_is_no_ones_use(stand_in_torch):
    """A first use that imports a private module runs its top-level code from the import system
    (a student's fresh kernel; the grader's kernels import it beforehand). Importing is not
    computing: the calls of private code from the student's code, its modules and the import
    system's function called by hand still count."""
    import importlib._bootstrap

    from standin_torch import public

    with ForbiddenCalls({}) as guard:
        public.first_use(torch.ones(3))
    assert guard.seen == []
    from standin_torch._refs import helpers
    with ForbiddenCalls({}) as guard:
        helpers.softmax(torch.ones(3))
    assert guard.seen == [PRIVATE_IMPLEMENTATIONS]
    with ForbiddenCalls({}) as guard:
        importlib._bootstrap._call_with_frames_removed(helpers.softmax, torch.ones(3))
    assert guard.seen == [PRIVATE_IMPLEMENTATIONS]
    with ForbiddenCalls({}) as guard:
        import students_module  # noqa: F401
    assert guard.seen == [PRIVATE_IMPLEMENTATIONS]

def test_switching_off_the_watch_is_a_forbidden_use():
    refs = _hidden_module("sfer_")
    switch = getattr(sys, "set" + "profile")

    def unwatched_softmax(x, dim=-1):
        switch(None)
        return vars(refs)["softmax"](x, dim)

    with ForbiddenCalls({}) as guard:
        unwatched_softmax(torch.randn(2, 3))
    assert guard.seen == [WATCH_SWITCHED_OFF]
    assert sys.getprofile() is None  # the hook that was there before the check, put back


def test_methods_borrowed_from_a_forbidden_class_are_its_use():
    forbidden = {nn.MultiheadAttention: "nn.MultiheadAttention"}
    donor = vars(nn)["Multihead" + "Attention"]

    class Borrower(nn.Module):  # no nn.MultiheadAttention inside: only its code
        forward = donor.forward

    with ForbiddenCalls(forbidden) as guard:
        mha = donor(4, 2, batch_first=True)  # its __init__ is its code too
    assert guard.seen == ["nn.MultiheadAttention"]
    borrower = Borrower()
    borrower.__dict__.update({k: v for k, v in vars(mha).items() if k != "training"})
    with ForbiddenCalls(forbidden) as guard:
        x = torch.randn(1, 3, 4)
        borrower(x, x, x)
    assert guard.seen == ["nn.MultiheadAttention"]
    with ForbiddenCalls(forbidden) as guard:  # its parent's methods are not its own
        nn.Linear(4, 4)(x)
    assert guard.seen == []


def test_student_exceptions_score_zero_for_their_case():
    reference = _reference_sdpa()

    def fails_with_masks(query, key, value, attn_mask=None, is_causal=False, scale=None):
        if attn_mask is not None:
            raise ValueError("masks are hard")
        return reference(query, key, value, attn_mask, is_causal, scale)

    with contextlib.redirect_stdout(io.StringIO()) as out:
        score = SDPA(fails_with_masks, points=3, cases=SMALL, device=CPU)
    assert score == 2.0
    assert "raised ValueError: masks are hard" in out.getvalue()
    assert 'raise ValueError("masks are hard")' in out.getvalue()  # the student's line


def test_printing_warning_and_fd_writes_still_pass(capfd):
    reference = _reference_sdpa()

    def noisy(*args, **kwargs):
        print("to stdout")
        print("to stderr", file=sys.stderr)
        warnings.warn("a warning")
        logging.getLogger("noisy").error("a log record")
        os.write(2, b"straight to fd 2\n")
        return reference(*args, **kwargs)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert SDPA(noisy, points=1, cases=SMALL, device=CPU) is None
    out, err = capfd.readouterr()
    assert err == "" and not caught
    assert out.startswith("✓") and "to stdout" not in out


def test_quiet_restores_streams():
    level = lambda: logging.root.manager.disable  # noqa: E731
    before = (sys.stdout, sys.stderr, level())
    with quiet():
        print("swallowed")
    assert (sys.stdout, sys.stderr, level()) == before


def test_inputs_changed_in_place_are_reported_and_do_not_confuse_the_diagnosis():
    def divides_query_in_place(query, key, value, attn_mask=None, is_causal=False, scale=None):
        query /= query.size(-1)  # 1/d_k instead of 1/sqrt(d_k), and the caller's tensor changes
        weights = (query @ key.transpose(-2, -1)).softmax(-1)
        return weights @ value, weights

    with contextlib.redirect_stdout(io.StringIO()) as out:
        SDPA(divides_query_in_place, points=1, cases=[dict(dtype="float64")], device=CPU)
    assert "divided by d_k" in out.getvalue() and "changed query in place" in out.getvalue()

    reference = _reference_sdpa()

    def right_but_zeroes_value(query, key, value, **kwargs):
        result = reference(query, key, value, **kwargs)
        value.zero_()
        return result

    with contextlib.redirect_stdout(io.StringIO()) as out:
        score = SDPA(right_but_zeroes_value, points=1, cases=[dict()], device=CPU)
    assert score == 0.25 and "changes its input in place" in out.getvalue()


# --------------------------------------------------------------------------
# tolerances, dtype, device


def test_float32_tolerance_holds_for_tf32_matmuls():
    """Every sdpa test cell of the notebook passes with TF32-rounded matmuls."""
    from classroom.notebook import run_test_cell

    namespace = NB.student({"scaled_dot_product_attention": ""})
    namespace["scaled_dot_product_attention"] = _sdpa_tf32
    for gid, cell in NB.tests.items():
        if "check_scaled_dot_product_attention" in cell.source:
            points, message = run_test_cell(cell, namespace)
            assert points == NB.points(gid), message


def test_values_tolerances():
    expected = torch.linspace(-2, 2, 50, dtype=torch.float64)
    assert compare((expected + 1e-4).float(), expected, torch.float32, "cpu").values_ok
    assert not compare((expected + 5e-2).float(), expected, torch.float32, "cpu").values_ok
    assert compare(expected + 1e-13, expected, torch.float64, "cpu").values_ok
    nan = expected.clone()
    nan[3] = math.nan
    verdict = compare(nan, expected, torch.float64, "cpu")
    assert not verdict.values_ok and "1 NaN/inf" in verdict.line and "max abs error 0" not in verdict.line
    assert TOLERANCES[torch.float64]["rtol"] < 1e-6 < TOLERANCES[torch.float32]["rtol"]

    def in_float32(query, key, value, **kwargs):
        output, weights = _sdpa_tf32(query.float(), key.float(), value.float(), **kwargs)
        return output.double(), weights.double()

    with contextlib.redirect_stdout(io.StringIO()) as out:
        SDPA(in_float32, points=1, cases=[dict(dtype="float64")], device=CPU)
    assert "float32 precision only" in out.getvalue()


def test_token_ids_are_compared_position_by_position_even_when_none_came_back():
    """Decoding one token too few with max_len=1 returns (batch, 0) tokens: the report says so
    and shows the sequences, as for any other wrong length (it once raised inside the judge)."""
    expected = torch.tensor([[1, 4, 7], [2, 5, 8]])
    empty = compare(torch.zeros(2, 0, dtype=torch.long), expected, torch.float32, "cpu")
    assert not empty.values_ok and "0 tokens per sequence, expected 3" in empty.line
    assert empty.details[0].split() == ["sequence", "0", "expected", "1", "4", "7"]
    shifted = compare(torch.tensor([[4, 7, 0], [5, 8, 0]]), expected, torch.float32, "cpu")
    assert "tokens differ at 6 of 6 positions" in shifted.line and shifted.details[2].split() == ["^"] * 3


def test_dtype_and_device_are_checked():
    expected = torch.zeros(2, 3, dtype=torch.float64)
    half = compare(torch.zeros(2, 3, dtype=torch.float16), expected, torch.float32, "cpu")
    assert not half.structure_ok and half.values_ok and "dtype float16, expected float32" in half.line
    shape = compare(torch.zeros(3, 2), expected, torch.float32, "cpu")
    assert not shape.structure_ok and not shape.values_ok and "expected (2, 3)" in shape.line
    elsewhere = compare(torch.zeros(2, 3, device="meta"), expected, torch.float32, "cpu")
    assert not elsewhere.structure_ok and "expected cpu (the input's device)" in elsewhere.line
    assert not compare([[0.0] * 3] * 2, expected, torch.float32, "cpu").structure_ok
    masks = compare(torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.bool), torch.float32, "cpu")
    assert "dtype float32, expected bool" in masks.line and "input" not in masks.line


def _sdpa_causal_on_cpu(query, key, value, attn_mask=None, is_causal=False, scale=None):
    """Right values, but the causal mask is made on the CPU: on a GPU the causal cases crash."""
    L, S = query.size(-2), key.size(-2)
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1)) if scale is None else \
        query @ key.transpose(-2, -1) * scale
    if is_causal:
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    weights = scores.softmax(-1)
    return weights @ value, weights


def test_a_device_bug_fails_without_a_gpu_as_it_would_on_one():
    """A mask made on the CPU passes on the CPU; the case's run on the meta device shows that it
    crashes on a GPU: that case is judged as a crash, with a hint quoting the call, the others pass."""
    probed = probe_all(SDPA, _sdpa_causal_on_cpu, SMALL, CPU)
    assert [o.error for o in probed.outcomes] == [None] * 3  # on the CPU every case runs ...
    assert [o.meta_error is not None for o in probed.outcomes] == [False, False, True]  # ... on a GPU one crashes
    report = judge_records(SDPA, _recorded(SDPA, _sdpa_causal_on_cpu, SMALL), SMALL, points=3)
    assert report.score == 2 and "1 of 3 cases fail" in report.text, report.text
    assert "case 3:" in report.text and "raised RuntimeError on a GPU" in report.text
    assert "`torch.ones(L, S, dtype=torch.bool)` creates a tensor on the CPU" in report.text
    assert "device=query.device" in report.text and "meta" not in report.text
    # the student's own notebook says the same
    here = judge(SDPA, SMALL, probed.outcomes, points=3, devices=["cpu"] * 3)
    assert (here.score, here.text) == (report.score, report.text)
    # a correct student keeps full marks: its meta runs raise nothing
    right = probe_all(SDPA, _reference_sdpa(), SMALL, CPU)
    assert [o.meta_error for o in right.outcomes] == [None] * 3


def test_a_device_bug_after_a_read_value_is_still_seen():
    """nn.TransformerEncoder reads a value (torch.equal(mask, causal)) before its layers run; on
    meta that raises, and the device bug after it went unseen (an H100 run of 08's corpus found
    it). The meta run answers such reads with made-up values and goes on to the bug."""
    def reads_values_first(query, key, value, **kwargs):
        finite = int(torch.isfinite(query).sum())  # .item()
        unchanged = torch.equal(key, key.clone())  # aten.equal, which meta does not implement
        assert finite >= 0 and unchanged in (True, False)
        return _sdpa_causal_on_cpu(query, key, value, **kwargs)

    probed = probe_all(SDPA, reads_values_first, SMALL, CPU)
    assert [o.error for o in probed.outcomes] == [None] * 3
    assert [o.meta_error is not None for o in probed.outcomes] == [False, False, True]
    assert "meta" in probed.outcomes[2].meta_error and "cpu" in probed.outcomes[2].meta_error  # devices mixed
    assert judge_records(SDPA, _recorded(SDPA, reads_values_first, SMALL), SMALL, points=3).score == 2


def test_a_device_crash_on_a_gpu_gets_the_same_hint_and_names_cuda():
    """On a GPU (Colab, a GPU grader) the bug raises for real; that crash gets the device hint the
    meta run gives on the CPU, and the report says the case ran on cuda (an H100 run of the corpus
    showed neither: no hint, and "float32 on cpu")."""
    crashed = _encode_outcome(Outcome(error="raised RuntimeError: ..."), torch.zeros(2, device="meta"))
    assert crashed["device"] == "meta"  # a crash records where it ran (meta stands in for cuda here)
    record = _recorded(SDPA, _sdpa_causal_on_cpu, SMALL)
    record["outcomes"][2] = {  # what the kernel records on an H100
        "error": "raised RuntimeError: expected self and mask to be on the same device, but got mask on cpu and "
                 "self on cuda:0\n      at: scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), "
                 "float(\"-inf\"))",
        "not_implemented": False, "modified": [], "device": "cuda:0"}
    report = judge_records(SDPA, record, SMALL, points=3)
    assert report.score == 2, report.text
    case = report.text[report.text.index("case 3:"):]
    assert "float32 on cuda" in case.splitlines()[0], case
    assert "`torch.ones(L, S, dtype=torch.bool)` creates a tensor on the CPU" in case
    # a device name is all the report takes from that field
    record["outcomes"][2]["device"] = "cuda\nhint: forged"
    assert "forged" not in judge_records(SDPA, record, SMALL, points=3).text


def test_failures_on_meta_that_are_no_device_bug_change_nothing():
    """Code that needs data (.item(), printing values, boolean indexing) cannot run on meta, and a
    0-dim CPU tensor may meet cuda tensors (masked_fill's value, a scale): never a failure."""
    reference = _reference_sdpa()

    def needs_data(query, key, value, **kwargs):
        print(query)
        assert bool(torch.isfinite(query).all()), "no NaN"  # .item() on meta
        query[query.abs() > 1e9] = 0.0  # boolean indexing: nonzero on meta
        scale = torch.tensor(query.size(-1), dtype=query.dtype).sqrt()  # 0-dim on the CPU: fine on cuda
        output, weights = reference(query * scale / scale, key, value, **kwargs)
        return output, weights.masked_fill(weights < -1, torch.tensor(0.0))  # 0-dim value: fine on cuda

    probed = probe_all(SDPA, needs_data, SMALL, CPU)
    assert all(o.meta_error for o in probed.outcomes)  # every meta run failed, none of them a device bug
    assert judge_records(SDPA, _recorded(SDPA, needs_data, SMALL), SMALL, points=3).score == 3


def _operators_on_meta(x, weight, bias, mask):
    """Operators whose meta kernels PyTorch writes in Python, and the shapes they meet in a model."""
    out, mean, rstd = torch.ops.aten.native_layer_norm(x, [x.size(-1)], weight, bias, 1e-5)
    return [out, mean, rstd, torch.addmm(bias, x.flatten(0, 1), weight.expand(x.size(-1), -1).t()),
            x.transpose(0, 1) + bias, x * 2, (x > 0).sum(-1), x.softmax(-1), x.masked_fill(mask, float("-inf")),
            torch.relu(x).exp(), *x.max(-1), torch.cat([x, x], dim=1), torch.where(mask, x, bias)]


def test_the_meta_run_takes_shapes_from_stand_ins_and_stays_on_meta():
    """The meta run computes a functional operator's outputs on CPU zeros of its inputs' shapes
    (PyTorch's Python meta kernels cost up to 3 ms a call): the outputs are the meta kernels'
    (shape, dtype) and stay on meta, with no value of the stand-ins in them."""
    def meta(*shape, dtype=torch.float32):
        return torch.empty(*shape, dtype=dtype, device="meta")

    inputs = meta(2, 5, 8), meta(8), meta(8), meta(2, 5, 8, dtype=torch.bool)
    by_kernels = _operators_on_meta(*inputs)
    with _OnMeta():
        by_stand_ins = _operators_on_meta(*inputs)
    assert [(t.shape, t.stride(), t.dtype) for t in by_stand_ins] == [(t.shape, t.stride(), t.dtype) for t in by_kernels]
    assert all(t.device.type == "meta" for t in by_stand_ins)
    with _OnMeta():  # a tensor too large for stand-ins is left to the meta kernel
        assert torch.empty(1 << 40, device="meta").add(1).shape == (1 << 40,)


def test_positions_made_on_the_inputs_device_are_shaped_on_the_cpu():
    """torch.arange(..., device=x.device) in the meta run: its meta kernel is a Python
    decomposition that loads torch._dynamo; made on the CPU, it is the same meta tensor. One made
    on the CPU still meets the inputs there, a device bug; a length too large, or a step of the
    wrong sign, is left to the meta kernel."""
    forms = [((7,), {}), ((1, 7, 2), {}), ((0.0, 1.0, 0.25), {}), ((3,), {"dtype": torch.float16}), ((5, -5, -3), {})]
    by_kernel = [torch.arange(*args, device="meta", **kwargs) for args, kwargs in forms]
    with _OnMeta():
        on_the_cpu = [torch.arange(*args, device="meta", **kwargs) for args, kwargs in forms]
        assert torch.arange(1 << 40, device="meta").shape == (1 << 40,)
        with pytest.raises(RuntimeError, match="inconsistent with step sign"):
            torch.arange(5, 0, 1, device="meta")
        with pytest.raises(RuntimeError, match="meta and cpu"):
            torch.empty(2, 5, device="meta") + torch.arange(5.0)
    assert [(t.shape, t.stride(), t.dtype, t.device.type) for t in on_the_cpu] == \
        [(t.shape, t.stride(), t.dtype, t.device.type) for t in by_kernel]


def test_the_meta_run_leaves_the_random_generator_and_device_arguments_as_they_are():
    """Operators that draw random numbers run on meta as before (on CPU stand-ins they would move
    the generator the student's later cells read), and so do those told a device: a tensor asked
    for on the CPU stays there, and meeting the inputs is a device bug."""
    state = torch.get_rng_state()
    with _OnMeta():
        dropped = F.dropout(torch.empty(2, 5, 8, device="meta"), 0.5, training=True)
    assert dropped.device.type == "meta" and torch.equal(state, torch.get_rng_state())

    def zeros_on_the_cpu(query, key, value, **kwargs):
        output, weights = _reference_sdpa()(query, key, value, **kwargs)
        return output + output.new_zeros(output.shape, device="cpu"), weights

    probed = probe_all(SDPA, zeros_on_the_cpu, SMALL, CPU)
    assert all("meta and cpu" in o.meta_error for o in probed.outcomes), [o.meta_error for o in probed.outcomes]


def test_the_meta_verdict_is_the_graders_and_forging_it_gains_nothing():
    """The kernel records what the meta run raised; the grader reads it. A record without it gets
    what a GPU-free grader gave before (the CPU run's verdict); one with a forged error only loses."""
    record = _recorded(SDPA, _sdpa_causal_on_cpu, SMALL)
    assert judge_records(SDPA, record, SMALL, points=3).score == 2
    for outcome in record["outcomes"]:
        outcome.pop("meta_error", None)
    assert judge_records(SDPA, record, SMALL, points=3).score == 3  # as before this check existed
    right = _recorded(SDPA, _reference_sdpa(), SMALL)
    assert all("meta_error" not in o for o in right["outcomes"])
    forged = dict(right, outcomes=[dict(o, meta_error=["not", "text"]) for o in right["outcomes"]])
    assert judge_records(SDPA, forged, SMALL, points=3).score == 3


def test_a_report_fits_on_a_screen():
    """Later cases are listed only for a hint not yet given, and five cases at most; a hint with
    the same words in every case (NaN rows) says "as above"."""
    errors = ["raised RuntimeError: view size is not compatible with input tensor's size and stride",
              "raised RuntimeError: shape '[2, 5]' is invalid for input of size 7",
              "raised IndexError: Dimension out of range (expected to be in range of [-2, 1], but got 2)",
              "raised RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)",
              "raised ValueError: not enough values to unpack (expected 4, got 3)",
              "raised RuntimeError: einsum(): the number of subscripts in the equation (3) does not match the "
              "number of dimensions (4) for operand 0 and no ellipsis was given",
              "raised RuntimeError: The size of tensor a (3) must match the size of tensor b (4) at non-singleton "
              "dimension 1"]
    cases = [dict(L=n + 2) for n in range(len(errors))]
    report = judge(SDPA, cases, [Outcome(error=e) for e in errors], points=1, devices=["cpu"] * len(cases))
    assert report.text.count("\ncase ") == 5 and report.text.count("hint:") == 5, report.text
    assert report.text.endswith("... and 2 more failing case(s)")

    def nan_rows(query, key, value, **kwargs):
        output, weights = _reference_sdpa()(query, key, value, **kwargs)
        first = torch.tensor([0], device=query.device)  # a CPU index would be a device bug of its own
        return output.clone().index_fill_(-2, first, math.nan), weights.index_fill(-2, first, math.nan)

    cases = [dict(L=n + 2) for n in range(6)]
    report = judge(SDPA, cases, probe_all(SDPA, nan_rows, cases, CPU).outcomes, points=1, devices=["cpu"] * 6)
    assert report.text.count("Rows of NaN") == 1 and report.text.count("hint: as above") == 2, report.text
    assert report.text.count("\ncase ") == 3 and len(report.text.splitlines()) <= 40


def test_a_module_tensor_that_to_does_not_move_is_a_device_bug():
    """A plain tensor attribute stays on the CPU when the check moves the module to the inputs'
    device; the hint says so (07's AdditiveAttention, a class check)."""
    from attention_checks.additive_attention import check_additive_attention
    import torch.nn as nn

    class AdditiveAttention(nn.Module):
        def __init__(self, query_size, key_size, hidden_size):
            super().__init__()
            self.w_q = nn.Linear(query_size, hidden_size, bias=False)
            self.w_k = nn.Linear(key_size, hidden_size, bias=False)
            self.v = nn.Linear(hidden_size, 1, bias=False)
            self.offset = torch.zeros(hidden_size)  # not a buffer: .to(device) leaves it on the CPU

        def forward(self, query, key, value, key_padding_mask=None):
            hidden = torch.tanh(self.w_q(query)[:, :, None] + self.w_k(key)[:, None] + self.offset)
            scores = self.v(hidden).squeeze(-1)  # (B, L, S)
            if key_padding_mask is not None:
                scores = scores.masked_fill(key_padding_mask[:, None, :], float("-inf"))
            weights = scores.softmax(-1)
            return weights @ value, weights

    cases = [dict(), dict(padding=True)]
    with contextlib.redirect_stdout(io.StringIO()) as out, pytest.raises(CheckFailed) as failed:
        check_additive_attention(AdditiveAttention, points=2, cases=cases, device=CPU)
    assert "2 of 2 cases fail" in str(failed.value) and "register_buffer" in str(failed.value), str(failed.value)
    assert not out.getvalue()


# --------------------------------------------------------------------------
# inputs


def test_inputs_are_deterministic_and_leave_the_global_rng_alone():
    state = torch.random.get_rng_state()
    a, b = SDPA.build(dict(mask="float")), SDPA.build(dict(mask="float"))
    c = SDPA.build(dict(mask="float", seed=1))
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(a.args["query"], b.args["query"]) and torch.equal(a.kwargs["attn_mask"], b.kwargs["attn_mask"])
    assert not torch.equal(a.args["query"], c.args["query"])
    # with the same seed, float32 and float64 cases see the same numbers
    x32, x64 = (SDPA.build(dict(seed=7, dtype=d)).args["query"] for d in ("float32", "float64"))
    assert torch.equal(x64.float(), x32)


def test_generated_masks_never_mask_a_whole_row():
    gen = torch.Generator().manual_seed(0)
    for shape in [(5, 2), (3, 4, 7), (2, 2, 1, 3)]:
        keep = keep_mask(shape, gen)
        assert keep.any(-1).all() and (~keep).any(-1).all()


def test_unknown_case_keys_are_an_instructor_error():
    with pytest.raises(ValueError, match="unknown case keys"):
        check_project_qkv(lambda *a: a, points=1, cases=[dict(d_modle=4)], device=CPU)
    with pytest.raises(ValueError, match="not both"):
        SDPA(lambda *a: a, points=1, cases=[dict(mask="bool", is_causal=True)])


# --------------------------------------------------------------------------
# the grader's side


def test_the_grader_judges_on_the_cpu_and_names_the_students_device():
    """A record from a kernel that ran on a GPU is judged on the CPU (same numbers on every
    grading machine), and the report names the device the student's code ran on."""
    reference = _reference_sdpa()
    halves = lambda q, k, v, **kw: (lambda o, w: (o / 2, w))(*reference(q, k, v, **kw))  # noqa: E731
    record = _recorded(SDPA, halves, [dict(scale=0.5)])
    for outcome in record["outcomes"]:
        outcome["device"] = "cuda:0"  # as a GPU kernel records it
        for tensor in outcome["value"]["sequence"]:
            tensor["tensor"]["device"] = "cuda:0"
    report = judge_records(SDPA, record, [dict(scale=0.5)], points=1)
    assert "float32 on cuda" in report.text and "on cpu" not in report.text, report.text
    assert report.score == 0.62


def test_a_record_judges_like_the_students_own_notebook():
    reference = _reference_sdpa()
    for fn in (reference, lambda q, k, v, **kw: reference(q * 2, k, v, **kw)):
        probed = probe_all(SDPA, fn, SMALL, CPU)
        here = judge(SDPA, SMALL, probed.outcomes, points=2, devices=["cpu"] * len(SMALL))
        there = judge_records(SDPA, _recorded(SDPA, fn, SMALL), SMALL, points=2)
        assert (here.score, here.text) == (there.score, there.text)


def test_a_record_that_does_not_fit_its_cases_scores_zero():
    record = _recorded(SDPA, _reference_sdpa(), SMALL)
    assert judge_records(SDPA, record, SMALL, points=2).score == 2
    assert judge_records(SDPA, dict(record, outcomes=record["outcomes"][:2]), SMALL, points=2).score == 0
    assert judge_records(SDPA, None, SMALL, points=2).score == 0
    garbled = dict(record, outcomes=[{"value": {"tensor": "?"}, "device": "cpu"}] * 3)
    assert judge_records(SDPA, garbled, SMALL, points=2).score == 0


def test_the_kernels_forbidden_calls_only_add_to_the_graders():
    record = _recorded(SDPA, _reference_sdpa(), SMALL)
    assert judge_records(SDPA, dict(record, forbidden=["F.scaled_dot_product_attention"]), SMALL, points=2).score == 0
    assert judge_records(SDPA, dict(record, forbidden=["not a name of this check"]), SMALL, points=2).score == 2
    assert judge_records(SDPA, record, SMALL, points=2, found=["F.scaled_dot_product_attention"]).score == 0


def test_records_are_taken_in_order_and_any_other_record_is_forged():
    one, two = dict(check="a"), dict(check="b")
    replay = Replay([one, two])
    assert replay.take("a") is one and replay.take("b") is two and replay.genuine
    forged_first = Replay([two, one])
    assert forged_first.take("a") is None and not forged_first.genuine
    extra = Replay([one, one])
    assert extra.take("a") is one and not extra.genuine
    missing = Replay([])
    assert missing.take("a") is None and missing.genuine


def test_outcome_of_an_error_keeps_what_was_changed():
    probed = probe_all(SDPA, lambda q, k, v, **kw: (q.zero_(), 1 / 0), [dict()], CPU)
    assert probed.outcomes[0].error and probed.outcomes[0].modified == ("query",)
    assert isinstance(probed.outcomes[0], Outcome)


def test_a_memory_bound_is_judged_on_the_memory_the_sandbox_measured():
    """flash_attention's long case: past its bound the check earns nothing, with the memory used quoted
    to two significant digits once sealed; within it, or failed already, the report stands; where
    nothing was measured (no sandbox), the values decide and the report says so."""
    from attention_checks.answers.judging import AS_IS, Report, Sealed
    from autograder.grading.judge import MIB, judge_memory

    passed = Report(3.0, 3.0, "✓ flash_attention: all 1 cases pass (3 / 3 points)")
    over = judge_memory(passed, "flash_attention", 32, 391 * MIB + 12345, Sealed([]))
    assert over.score == 0 and "used 390 MiB of memory" in over.text and "fits in 32 MiB" in over.text
    assert "used 391 MiB" in judge_memory(passed, "flash_attention", 32, 391 * MIB, AS_IS).text
    assert judge_memory(passed, "flash_attention", 32, 31 * MIB, AS_IS) == passed
    failed = Report(0.0, 3.0, "✗ flash_attention: 1 of 1 cases fail (0 / 3 points)")
    assert judge_memory(failed, "flash_attention", 32, 500 * MIB, AS_IS) == failed
    unmeasured = judge_memory(passed, "flash_attention", 32, None, AS_IS)
    assert unmeasured.score == 3 and "not measured here" in unmeasured.text


# --------------------------------------------------------------------------
# the contract's dtypes: integer outputs


def _as_int32(value):
    if isinstance(value, tuple):
        return tuple(_as_int32(v) for v in value)
    return value.int() if isinstance(value, torch.Tensor) and not value.is_floating_point() else value


@pytest.mark.parametrize("assignment, name, what", [
    ("08-decoder", "shift_right", "the inputs' dtype (int64)"),
    ("08-decoder", "greedy_decode", "the inputs' dtype (int64)"),
    ("10-positions-and-generation", "sample_next", "token ids of dtype int64"),
    ("10-positions-and-generation", "beam_search", "token ids of dtype int64"),
])
def test_integer_outputs_of_another_dtype_lose_points_and_name_the_dtype(assignment, name, what):
    """Issue 58, item 6: the right token ids as int32, where the contract says int64, fail every case
    (sample_next's right structure is worth nothing when values are wrong, and its int32 tokens
    earned full marks), with the expected dtype named."""
    from attention_checks import registry

    check = next(c for c in registry.load_all().values() if c.name == name)
    notebook = SourceNotebook(assignment)
    right = notebook.student()[name]
    cases = [spec for gid, cell in notebook.tests.items() if f"{name}(" in cell.source
             for spec in notebook.cases(gid)][:2]
    assert check_report(check, right, cases, points=2)[0] == 2
    score, text = check_report(check, lambda *a, **k: _as_int32(right(*a, **k)), cases, points=2)
    assert 0 < score < 2 and "dtype int32, expected int64" in text and what in text, text


def test_a_matrix_product_hint_names_a_transpose_only_where_the_line_makes_one():
    from attention_checks.answers.hints import crash_hints

    error = "raised RuntimeError: mat1 and mat2 shapes cannot be multiplied (10x4 and 8x8)\n      at: {}"
    assert any("check which axes you transpose" in h
               for h in crash_hints(error.format("scores = q @ k.transpose(0, 1)"), {}))
    plain = crash_hints(error.format("scores = q @ w"), {})
    assert plain and not any("transpose" in h for h in plain), plain


def test_an_operator_given_a_pair_of_values_and_indices_is_told_to_take_its_values():
    """Python's own message names the pair's type (max along a dim gives values and indices), which
    the student's line shows only as `x.max(dim=dim)`: the hint holds where the message says so."""
    from attention_checks.answers.hints import crash_hints

    error = ("raised TypeError: unsupported operand type(s) for -: 'Tensor' and 'torch.return_types.{}'\n"
             "      at: shifted = x - x.{}(dim=dim, keepdim=True)")
    assert any("`.values`" in h and "`amax(dim=...)`" in h for h in crash_hints(error.format("max", "max"), {}))
    assert any("`.values`" in h and "amax" not in h for h in crash_hints(error.format("sort", "sort"), {}))
    other = "raised TypeError: unsupported operand type(s) for -: 'Tensor' and 'list'\n      at: x - [1]"
    assert not any("`.values`" in h for h in crash_hints(other, {}))


def test_sample_nexts_drawing_hints_defer_to_a_failing_next_token_distribution():
    """Tokens that are the most probable ones are what argmax drawing gives, and also what a
    distribution whose top-k keeps the wrong end gives: where the grader saw next_token_distribution
    fail its own tests, sample_next's hint says to fix those first, not its drawing."""
    from attention_checks.answers.judging import judge, judged
    from attention_checks.record import Outcome
    from attention_checks.registry import load_all

    (check,) = [c for c in load_all().values() if c.name == "sample_next"]
    cases = [dict()]
    argmax = judged(check, cases[0]).x.args["logits"].argmax(-1)  # what top_k=1 would keep: argmax draws

    def hints(seen):
        report = judge(check, cases, [Outcome(argmax)], points=1, seen=seen)
        return [line.strip() for line in report.text.splitlines() if line.strip().startswith("hint:")]

    own = hints(None)
    assert any("You take the most probable token" in h for h in own), own
    assert hints({"next_token_distribution": True}) == own
    failed = hints({"next_token_distribution": False})
    assert any(h.startswith("hint: Your next_token_distribution fails its own tests above: ") for h in failed), failed
    assert not any("You take the most probable token" in h for h in failed), failed


def test_a_decided_cause_replaces_its_mistake_also_where_a_hint_names_several():
    """Twins merged into one hint ("One of these mistakes ...: A. Or: B") keep each part's own
    Depends: the part the grader's tests decided is replaced, the others stay, a claim stays one."""
    from attention_checks.answers.catalogue import Mistake, merge_twins, named_mistakes, one_of
    from attention_checks.answers.hints import Claim
    from attention_checks.answers.judging import _with_decided

    same = {"tokens": torch.tensor([1, 2])}
    a = Mistake("Your top-p keeps one token too few.", same)
    b = Mistake("You take the most probable token.", same, depends=answers_10._of_sample_next("x", same).depends)
    (merged,) = merge_twins({"a": a, "b": b}).values()
    assert merged.members == (a, b) and merged.hint == one_of([a.hint, b.hint])
    said = b.depends.said({"next_token_distribution": False})
    decided = {part.hint: said for part in merged.members if part.depends is not None}
    claim = _with_decided(Claim(merged.hint, named_mistakes(merged.hint)), decided)
    assert isinstance(claim, Claim) and claim == one_of([a.hint, said]) and claim.mistakes == (a.hint, b.hint)
    assert _with_decided(a.hint, decided) == a.hint


def test_a_hint_that_depends_on_other_tests_says_the_cause_the_grader_saw():
    """08's training curve has two causes a student's own notebook cannot tell apart (judged one test
    at a time, its hint words both); the grader has judged the model's parts first, and says the
    cause their own tests show: the parts that failed, or dropout once they all pass (issue 59)."""
    from attention_checks.answers import decoder as answers_08
    from attention_checks.answers.judging import judge, judged
    from attention_checks.record import Outcome
    from attention_checks.registry import load_all

    (check,) = [c for c in load_all().values() if c.name == "training"]
    cases = [dict()]
    right = judged(check, cases[0]).expected["losses"]
    first_loss_off = [Outcome((right + 0.5).to(torch.float32))]  # every loss off, the first included

    def hints(seen):
        report = judge(check, cases, first_loss_off, points=2, seen=seen)
        return [line.strip() for line in report.text.splitlines() if line.strip().startswith("hint:")]

    (both,) = hints(None)
    assert answers_08.FIRST_LOSS_DIFFERS in both and "If your Transformer passes its own test" in both
    assert hints({"DecoderLayer": True}) == [both]  # Decoder and Transformer not judged: undecided
    (one_failed,) = hints({"DecoderLayer": True, "Decoder": False, "Transformer": True})
    assert one_failed.startswith("hint: Your Decoder fails its own tests above: ") and "dropout" not in one_failed
    (two_failed,) = hints({"DecoderLayer": False, "Decoder": True, "Transformer": False})
    assert two_failed.startswith("hint: Your DecoderLayer and Transformer fail their own tests above: ")
    (passed,) = hints({"DecoderLayer": True, "Decoder": True, "Transformer": True})
    assert answers_08.PARTS_PASS in passed and "dropout" in passed and " If " not in passed
