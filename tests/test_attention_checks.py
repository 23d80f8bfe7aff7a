"""Fast in-process tests of attention_checks, driven by the 03-qkv source notebook.

The notebook's own cells are executed here (the setup cell, the reference solution
cells, the test cells), and each test cell is scored with nbgrader's own
`determine_grade` on the outputs a kernel would record, so the tests follow the
notebook rather than a copy of it.
"""
from __future__ import annotations

import ast
import contextlib
import io
import math
import re
import sys
import warnings
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F
from nbformat.v4 import new_output

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from attention_checks import TOLERANCES, CheckFailed, PartialCredit  # noqa: E402
from attention_checks.core import Case, ForbiddenCalls, compare, quiet, run_check  # noqa: E402
from attention_checks.qkv import (  # noqa: E402
    FORBIDDEN_SDPA,
    _keep_mask,
    _sdpa_case,
    check_project_qkv,
    check_scaled_dot_product_attention,
)

NOTEBOOK = ROOT / "solutions" / "03-qkv" / "qkv.ipynb"
CORPUS = ROOT / "tests" / "corpus" / "03-qkv"
CPU = torch.device("cpu")


# --------------------------------------------------------------------------
# the notebook, cell by cell


def _nbgrader(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


NB = nbformat.read(NOTEBOOK, as_version=4)
CELLS = {_nbgrader(c)["grade_id"]: c for c in NB.cells}
SOLUTIONS = {gid: c.source for gid, c in CELLS.items() if _nbgrader(c).get("solution")}
TESTS = {gid: c for gid, c in CELLS.items() if _nbgrader(c).get("grade")}
MAX_SCORE = sum(float(_nbgrader(c)["points"]) for c in TESTS.values())


def _python(source: str) -> str:
    """A cell's source as IPython runs it (the setup cell holds a %pip line)."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


def student(answers: dict[str, str] | None = None) -> dict:
    """The namespace of a kernel that ran the setup cell and the solution cells,
    each solution cell replaced by answers[grade_id] when given."""
    namespace: dict = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(_python(CELLS["setup"].source), "<setup>", "exec"), namespace)
        for gid, source in SOLUTIONS.items():
            exec(compile((answers or {}).get(gid, source), f"<{gid}>", "exec"), namespace)
    return namespace


def run_test_cell(cell, namespace: dict) -> tuple[float, str]:
    """Run a test cell as a kernel would, and grade its outputs as nbgrader does.
    Returns (points, everything it printed or raised)."""
    from IPython.core.formatters import PlainTextFormatter
    from nbgrader.utils import determine_grade

    tree = ast.parse(cell.source)
    assert isinstance(tree.body[-1], ast.Expr), "a check must be the last expression of its cell"
    body = ast.Module(tree.body[:-1], type_ignores=[])
    last = ast.Expression(tree.body[-1].value)
    stdout, stderr, outputs = io.StringIO(), io.StringIO(), []
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), warnings.catch_warnings(
        record=True
    ) as caught:
        warnings.simplefilter("always")
        try:
            exec(compile(body, "<test>", "exec"), namespace)
            value = eval(compile(last, "<test>", "eval"), namespace)
            error = None
        except CheckFailed as failed:
            value, error = None, failed
    err_text = stderr.getvalue() + "".join(f"{w.category.__name__}: {w.message}\n" for w in caught)
    if stdout.getvalue():
        outputs.append(new_output("stream", name="stdout", text=stdout.getvalue()))
    if err_text:  # what a kernel would show on stderr: nbgrader then gives 0
        outputs.append(new_output("stream", name="stderr", text=err_text))
    if error is not None:
        outputs.append(new_output("error", ename=type(error).__name__, evalue=str(error), traceback=[]))
    elif value is not None:
        outputs.append(new_output("execute_result", data={"text/plain": PlainTextFormatter()(value)}, execution_count=1))
    graded = nbformat.from_dict(dict(cell, outputs=outputs))
    points, max_points = determine_grade(graded)
    assert max_points == float(_nbgrader(cell)["points"])
    message = stdout.getvalue() + err_text + (str(error) if error else "")
    return points, message


def grade_all(answers: dict[str, str] | None = None) -> dict[str, tuple[float, str]]:
    namespace = student(answers)
    return {gid: run_test_cell(cell, namespace) for gid, cell in TESTS.items()}


# --------------------------------------------------------------------------
# the notebook's structure


def test_notebook_layout():
    assert NB.metadata.kernelspec.name == "python3"
    assert len(CELLS) == len(NB.cells), "grade_ids must be unique"
    assert set(SOLUTIONS) == {"project_qkv", "scaled_dot_product_attention"}
    for gid, source in SOLUTIONS.items():
        assert "### BEGIN SOLUTION" in source and "### END SOLUTION" in source, gid
    hidden = [gid for gid, cell in TESTS.items() if "### BEGIN HIDDEN TESTS" in cell.source]
    assert hidden and len(hidden) < len(TESTS)
    for gid, cell in TESTS.items():
        meta = _nbgrader(cell)
        assert meta["locked"] and not meta["solution"] and meta["schema_version"] == 3
        # the points passed to the check are the cell's points, and the check is the last expression
        assert re.findall(r"points=([\d.]+)", cell.source) == [f"{meta['points']:g}"], gid
        assert not cell.source.rstrip().endswith(";"), gid
        if gid in hidden:  # the whole check lives in the hidden region
            assert cell.source.rstrip().endswith("### END HIDDEN TESTS"), gid
    assert 10 <= MAX_SCORE <= 12


def test_reference_solution_gets_full_marks():
    for gid, (points, message) in grade_all().items():
        assert points == float(_nbgrader(TESTS[gid])["points"]), (gid, message)
        assert message.startswith("✓"), message


def test_stub_gets_zero_in_every_test_cell():
    stubs = {
        gid: re.sub(r"### BEGIN SOLUTION.*?### END SOLUTION", "raise NotImplementedError()", source, flags=re.S)
        for gid, source in SOLUTIONS.items()
    }
    for gid, (points, message) in grade_all(stubs).items():
        assert points == 0, gid
        assert "not implemented" in message.lower(), message


# --------------------------------------------------------------------------
# the corpus of simulated students


def _corpus(path: Path):
    text = path.read_text()
    expect = re.search(r"^# expect: (full|partial)\s*$", text, re.M).group(1)
    hint = re.search(r"^# hint: (.+?)\s*$", text, re.M)
    chunks = re.split(r"^# %% cell: (\S+)\s*$", text, flags=re.M)
    cells = {chunks[i]: chunks[i + 1] for i in range(1, len(chunks), 2)}
    return expect, hint and hint.group(1), cells


CORPUS_FILES = sorted(CORPUS.glob("*.py"))


def test_corpus_is_big_enough():
    expects = [_corpus(p)[0] for p in CORPUS_FILES]
    assert expects.count("full") >= 3 and expects.count("partial") >= 8


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.stem)
def test_corpus_student(path):
    expect, hint, cells = _corpus(path)
    assert set(cells) <= set(SOLUTIONS)
    results = grade_all(cells)
    total = sum(points for points, _ in results.values())
    messages = "\n".join(message for _, message in results.values())
    if expect == "full":
        assert total == MAX_SCORE, messages
    else:
        assert 0 < total < MAX_SCORE, messages
        if hint:
            assert hint.lower() in messages.lower(), messages


# --------------------------------------------------------------------------
# partial credit as nbgrader reads it


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


def _fixed_case(expected: torch.Tensor, like: torch.Tensor) -> Case:
    return Case(inputs="x", run=lambda fn: fn(), expected={"y": expected}, like=like)


def test_scores_follow_the_fraction_of_cases():
    ref = torch.ones(3, dtype=torch.float64)
    like = torch.ones(3)
    cases = [_fixed_case(ref, like) for _ in range(4)]
    calls = iter([torch.ones(3), torch.ones(3), torch.zeros(3), torch.ones(3, dtype=torch.float64)])
    with contextlib.redirect_stdout(io.StringIO()) as out:
        score = run_check("f", lambda: next(calls), cases, points=2)
    # per case: 1, 1, 0.25 (right structure, wrong values), 0.75 (wrong dtype, right values)
    assert isinstance(score, PartialCredit) and score == round(2 * 3.0 / 4, 2)
    assert "2 of 4 cases fail" in out.getvalue() and "dtype float64, expected float32" in out.getvalue()

    nearly = iter([torch.ones(3)] * 399 + [torch.ones(3) * 2])  # 99.8 % right never shows full points
    score = run_check("f", lambda: next(nearly), [_fixed_case(ref, like)] * 400, points=1)
    assert score == 0.99

    with pytest.raises(CheckFailed, match="0 / 2"):
        run_check("f", lambda: [1, 2], cases, points=2)
    with pytest.raises(CheckFailed, match="expected a function"):
        run_check("f", None, cases, points=2)


def test_check_failed_renders_without_frames():
    lines = CheckFailed("first line\nsecond line")._render_traceback_()
    assert len(lines) == 2 and lines[0].endswith("first line") and "File" not in "".join(lines)


# --------------------------------------------------------------------------
# forbidden calls, student exceptions, printing


def _reference_sdpa():
    return student()["scaled_dot_product_attention"]


SMALL = [dict(), dict(mask="bool", L=4, S=6), dict(is_causal=True)]


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
        check_scaled_dot_product_attention(cheat, points=2, cases=SMALL, device=CPU)


def test_forbidden_detector_ignores_other_calls():
    with ForbiddenCalls(FORBIDDEN_SDPA) as guard:
        x = torch.randn(2, 3)
        (x @ x.T).softmax(-1)
        F.softmax(x, -1)
    assert guard.seen == []


def test_student_exceptions_score_zero_for_their_case():
    reference = _reference_sdpa()

    def fails_with_masks(query, key, value, attn_mask=None, is_causal=False, scale=None):
        if attn_mask is not None:
            raise ValueError("masks are hard")
        return reference(query, key, value, attn_mask, is_causal, scale)

    with contextlib.redirect_stdout(io.StringIO()) as out:
        score = check_scaled_dot_product_attention(fails_with_masks, points=3, cases=SMALL, device=CPU)
    assert score == 2.0
    assert "raised ValueError: masks are hard" in out.getvalue()
    assert 'raise ValueError("masks are hard")' in out.getvalue()  # the student's line


def test_printing_warning_and_fd_writes_still_pass(capfd):
    import logging
    import os

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
        assert check_scaled_dot_product_attention(noisy, points=1, cases=SMALL, device=CPU) is None
    out, err = capfd.readouterr()
    assert err == "" and not caught
    assert out.startswith("✓") and "to stdout" not in out


def test_quiet_restores_streams():
    before = (sys.stdout, sys.stderr, logging_disable_level())
    with quiet():
        print("swallowed")
    assert (sys.stdout, sys.stderr, logging_disable_level()) == before


def logging_disable_level():
    import logging

    return logging.root.manager.disable


# --------------------------------------------------------------------------
# tolerances, dtype, device


def _tf32(x: torch.Tensor) -> torch.Tensor:
    """Round float32 to TF32 (10-bit mantissa), as a GPU's tensor cores do before a matmul."""
    bits = x.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


def _sdpa_tf32(query, key, value, attn_mask=None, is_causal=False, scale=None):
    mm = (lambda a, b: _tf32(a) @ _tf32(b)) if query.dtype == torch.float32 else torch.matmul
    L, S = query.size(-2), key.size(-2)
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = mm(query, key.transpose(-2, -1)) * scale
    if is_causal:
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    weights = scores.softmax(-1)
    return mm(weights, value), weights


def test_float32_tolerance_holds_for_tf32_matmuls():
    """Every sdpa test cell of the notebook passes with TF32-rounded matmuls."""
    namespace = student({"scaled_dot_product_attention": ""})
    namespace["scaled_dot_product_attention"] = _sdpa_tf32
    for gid, cell in TESTS.items():
        if "check_scaled_dot_product_attention" in cell.source:
            points, message = run_test_cell(cell, namespace)
            assert points == float(_nbgrader(cell)["points"]), message


def test_values_tolerances():
    expected = torch.linspace(-2, 2, 50, dtype=torch.float64)
    like32, like64 = torch.zeros(1), torch.zeros(1, dtype=torch.float64)
    assert compare((expected + 1e-4).float(), expected, like32).values_ok
    assert not compare((expected + 5e-2).float(), expected, like32).values_ok
    assert compare(expected + 1e-13, expected, like64).values_ok
    computed_in_float32 = expected.float().exp().double()
    verdict = compare(computed_in_float32, expected.exp(), like64)
    assert not verdict.values_ok and "float32 precision only" in verdict.line
    nan = expected.clone()
    nan[3] = math.nan
    assert not compare(nan, expected, like64).values_ok
    assert TOLERANCES[torch.float64]["rtol"] < 1e-6 < TOLERANCES[torch.float32]["rtol"]


def test_dtype_and_device_are_checked():
    expected = torch.zeros(2, 3, dtype=torch.float64)
    like = torch.zeros(1)
    half = compare(torch.zeros(2, 3, dtype=torch.float16), expected, like)
    assert not half.structure_ok and half.values_ok and "dtype float16, expected float32" in half.line
    shape = compare(torch.zeros(3, 2), expected, like)
    assert not shape.structure_ok and not shape.values_ok and "expected (2, 3)" in shape.line
    elsewhere = compare(torch.zeros(2, 3, device="meta"), expected, like)
    assert not elsewhere.structure_ok and "expected cpu (the input's device)" in elsewhere.line
    assert not compare([[0.0] * 3] * 2, expected, like).structure_ok

    def float64_out(query, key, value, **kwargs):
        output, weights = _sdpa_tf32(query.double(), key.double(), value.double(), **kwargs)
        return output, weights

    with contextlib.redirect_stdout(io.StringIO()) as out:
        score = check_scaled_dot_product_attention(float64_out, points=1, cases=[dict()], device=CPU)
    assert score == 0.75 and "expected float32 (the input's)" in out.getvalue()


# --------------------------------------------------------------------------
# inputs and references


def test_inputs_are_deterministic_and_leave_the_global_rng_alone():
    state = torch.random.get_rng_state()
    a, b = _sdpa_case(dict(mask="float"), CPU), _sdpa_case(dict(mask="float"), CPU)
    c = _sdpa_case(dict(mask="float", seed=1), CPU)
    assert torch.equal(torch.random.get_rng_state(), state)
    grab = []
    a.run(lambda *args, **kwargs: grab.append((args, kwargs)))
    b.run(lambda *args, **kwargs: grab.append((args, kwargs)))
    c.run(lambda *args, **kwargs: grab.append((args, kwargs)))
    (qa, *_), ma = grab[0][0], grab[0][1]["attn_mask"]
    (qb, *_), mb = grab[1][0], grab[1][1]["attn_mask"]
    assert torch.equal(qa, qb) and torch.equal(ma, mb)
    assert not torch.equal(qa, grab[2][0][0])
    # with the same seed, float32 and float64 cases see the same numbers
    for dtype in ("float32", "float64"):
        _sdpa_case(dict(seed=7, dtype=dtype), CPU).run(lambda *args, **kwargs: grab.append(args[0]))
    assert torch.equal(grab[-1].float(), grab[-2])


def test_generated_masks_never_mask_a_whole_row():
    gen = torch.Generator().manual_seed(0)
    for shape in [(5, 2), (3, 4, 7), (2, 2, 1, 3)]:
        keep = _keep_mask(shape, gen)
        assert keep.any(-1).all() and (~keep).any(-1).all()


@pytest.mark.parametrize("spec", [dict(), dict(mask="bool", L=3, S=7), dict(mask="float", batch=(2, 3), L=6, S=3),
                                  dict(is_causal=True, L=6, S=3), dict(is_causal=True, L=2, S=5, scale=0.3)])
def test_reference_weights_agree_with_pytorch_output(spec):
    case = _sdpa_case(spec, CPU)
    got = []
    case.run(lambda q, k, v, **kw: got.append(v))
    value = got[0].double()
    weights, output = case.expected["weights"], case.expected["output"]
    torch.testing.assert_close(weights @ value, output, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1], dtype=torch.float64))


def test_unknown_case_keys_are_an_instructor_error():
    with pytest.raises(ValueError, match="unknown case keys"):
        check_project_qkv(lambda *a: a, points=1, cases=[dict(d_modle=4)], device=CPU)
    with pytest.raises(ValueError, match="not both"):
        check_scaled_dot_product_attention(lambda *a: a, points=1, cases=[dict(mask="bool", is_causal=True)])


# --------------------------------------------------------------------------
# diagnoses the corpus does not cover


def _buggy(**change):
    """The reference with one step changed."""

    def sdpa(query, key, value, attn_mask=None, is_causal=False, scale=None):
        L, S, E = query.size(-2), key.size(-2), query.size(-1)
        s = 1 / math.sqrt(E) if scale is None else scale
        scores = query @ key.transpose(-2, -1)
        scores = (scores + attn_mask) * s if change.get("mask_before_scale") else scores * s
        if is_causal:
            keep = torch.ones(L, S, dtype=torch.bool).tril(change.get("diagonal", 0))
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


def _report(fn, cases) -> str:
    """What a check of fn says, printed or raised."""
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            check_scaled_dot_product_attention(fn, points=1, cases=cases, device=CPU)
        except CheckFailed as failed:
            return str(failed)
    return out.getvalue()


@pytest.mark.parametrize("change, cases, hint", [
    (dict(flip=True), [dict(is_causal=True)], "causal mask is flipped"),
    (dict(diagonal=-1), [dict(is_causal=True, L=4, S=6)], "attend key i itself"),
    (dict(after=True), [dict(mask="bool")], "before the softmax"),
    (dict(mask_before_scale=True), [dict(mask="float")], "after scaling"),
    (dict(divide_scale=True), [dict(scale=0.5)], "you seem to divide"),
])
def test_more_diagnoses(change, cases, hint):
    report = _report(_buggy(**change), cases)
    assert hint in report, report


def test_inputs_modified_in_place_do_not_confuse_the_diagnosis():
    """On the CPU a float64 input reaches the student as is: references must be copies."""

    def divides_query_in_place(query, key, value, attn_mask=None, is_causal=False, scale=None):
        query /= query.size(-1)  # 1/d_k instead of 1/sqrt(d_k), and the caller's tensor changes
        weights = (query @ key.transpose(-2, -1)).softmax(-1)
        return weights @ value, weights

    report = _report(divides_query_in_place, [dict(dtype="float64")])
    assert "divided by d_k" in report, report


def test_cases_are_built_once_per_grader_process_and_fresh_in_a_kernel():
    """The grader judges every student against the same cases: it builds each once. In a
    kernel, where the student's code runs (and could change its inputs), never shared."""
    from attention_checks.qkv import _sdpa_case
    from attention_checks.record import Replay, replaying

    spec, cpu = dict(L=3, mask="bool"), torch.device("cpu")
    assert _sdpa_case(spec, cpu) is not _sdpa_case(spec, cpu)
    with replaying(Replay([], lambda *_: [])):
        first = _sdpa_case(spec, cpu)
        assert _sdpa_case(dict(mask="bool", L=3), cpu) is first  # the same spec, in any order
        assert _sdpa_case(dict(L=4, mask="bool"), cpu) is not first
    fresh = _sdpa_case(spec, cpu)
    assert fresh is not first
    for name, tensor in first.expected.items():
        assert torch.equal(tensor, fresh.expected[name])


def test_the_grader_judges_on_the_cpu_and_names_the_students_device(monkeypatch):
    """A record from a kernel that ran on a GPU is judged on the CPU (same numbers on every
    grading machine), and the report names the device the student's code ran on."""
    from attention_checks import core, record

    published = []
    monkeypatch.setattr(core, "recording", lambda: True)
    monkeypatch.setattr(core, "publish", lambda name, outcomes, likes, seen: published.append(dict(
        check=name, forbidden=list(seen), outcomes=[record._encode_outcome(o, like) for o, like in zip(outcomes, likes)])))
    wrong_scale = _buggy(divide_scale=True)
    cases = [dict(scale=0.5)]
    check_scaled_dot_product_attention(wrong_scale, points=1, cases=cases, device=CPU)
    monkeypatch.undo()
    for outcome in published[0]["outcomes"]:
        outcome["device"] = "cuda:0"  # as a GPU kernel records it
        for tensor in outcome["value"]["sequence"]:
            tensor["tensor"]["device"] = "cuda:0"

    from autograder.judge import StudentObject

    seen = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a grading machine with a GPU
    with record.replaying(record.Replay(published, lambda student, names: [])), \
            contextlib.redirect_stdout(io.StringIO()) as out:
        seen.append(core.pick_device())  # the device a test cell's check uses by default
        try:  # the test cell's own call, as JudgeTests runs it
            check_scaled_dot_product_attention(StudentObject("sdpa"), points=1, cases=cases)
        except CheckFailed as failed:
            print(failed)
    report = out.getvalue()
    assert seen == [torch.device("cpu")]
    assert "float32 on cuda" in report and "on cpu" not in report, report
    assert "you seem to divide" in report  # judged on the values: the same diagnosis
