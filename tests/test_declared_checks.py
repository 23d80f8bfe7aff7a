"""Every assignment's notebook against its declared checks, one parametrised module for all:
the layout of the source notebook, full marks for the reference solution, zero for the
release stubs, a sample of the corpus of simulated students (in-process), and the promises of every
declared check (answers for it, deterministic inputs, no answer in a recording kernel).
Adding an assignment adds its cases here without a line of test code."""
from __future__ import annotations

import ast
import importlib
import json
import os
import re
import subprocess
import sys

import pytest
import torch

from attention_checks import registry
from attention_checks.answers.judging import answer_for, judged
from attention_checks.record import RECORD_VARIABLE
from autograder.layout import find_assignments
from classroom import REPO, secret_lines, written_answers
from classroom.notebook import SourceNotebook, _nbgrader, load_corpus

ASSIGNMENTS = find_assignments(REPO / "solutions")
CHECKS = list(registry.load_all().values())
_NOTEBOOKS: dict[str, SourceNotebook] = {}


def notebook(assignment: str) -> SourceNotebook:
    if assignment not in _NOTEBOOKS:
        _NOTEBOOKS[assignment] = SourceNotebook(assignment)
    return _NOTEBOOKS[assignment]


def called_check(cell_source: str) -> tuple[str, str]:
    """(check function, student object) of a test cell's last expression."""
    call = ast.parse(cell_source).body[-1].value
    return call.func.id, call.args[0].id


def declared(assignment: str) -> bool:
    """Whether every check the notebook calls is declared in the registry."""
    nb = notebook(assignment)
    return all(called_check(c.source)[0] in registry.REGISTRY for c in nb.tests.values())


# --------------------------------------------------------------------------
# the source notebooks


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_notebook_layout(assignment):
    nb = notebook(assignment)
    assert nb.nb.metadata.kernelspec.name == "python3"
    assert len(nb.cells) == len(nb.nb.cells), "grade_ids must be unique"
    assert "setup" in nb.cells and nb.solutions and nb.tests
    for gid, source in nb.solutions.items():
        assert "### BEGIN SOLUTION" in source and "### END SOLUTION" in source, gid
    hidden = nb.hidden()
    assert hidden and len(hidden) < len(nb.tests)
    for gid, cell in nb.tests.items():
        meta = _nbgrader(cell)
        assert meta["locked"] and not meta["solution"] and meta["schema_version"] == 3, gid
        # one check call, the cell's last expression, with the cell's points
        assert re.findall(r"points=([\d.]+)", cell.source) == [f"{meta['points']:g}"], gid
        assert not cell.source.rstrip().endswith(";"), gid
        function, student = called_check(cell.source)
        assert function in registry.REGISTRY and student in nb.student(), gid
        if gid in hidden:  # the whole check lives in the hidden region
            assert cell.source.rstrip().endswith("### END HIDDEN TESTS"), gid


WRITTEN_QUESTION = re.compile(r"\*\*Written question \((?P<points>[12]) points?, graded by hand\)\.\*\* \S")


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_written_questions_follow_the_course_format(assignment):
    """Issue 19: each written question is two cells after the last autograded test: the locked
    question, which says its points, then the answer, a markdown cell graded by hand (nbgrader's
    manually graded answer) whose source is a model answer, with the points the question says."""
    nb = notebook(assignment)
    cells = nb.nb.cells
    gids = [_nbgrader(c).get("grade_id") for c in cells]
    last_test = max(gids.index(gid) for gid in nb.tests)
    assert len(nb.written) == 1, "every notebook has one written question"
    for gid, answer in nb.written.items():
        meta = _nbgrader(answer)
        assert gid.startswith("written-") and answer.cell_type == "markdown", gid
        assert meta == {"grade": True, "solution": True, "locked": False, "points": meta["points"],
                        "grade_id": gid, "schema_version": 3} and meta["points"] in (1, 2), meta
        at = gids.index(gid)
        question = cells[at - 1]
        assert at - 1 > last_test and question.cell_type == "markdown", gid
        assert _nbgrader(question) == {"grade": False, "solution": False, "locked": True,
                                       "grade_id": f"{gid}-question", "schema_version": 3}, gid
        match = WRITTEN_QUESTION.match(question.source)
        assert match and int(match["points"]) == meta["points"], question.source[:80]
        # a model answer for the grader, a few sentences long, with no solution delimiters: nbgrader
        # replaces the whole cell with "YOUR ANSWER HERE" in the student's notebook
        assert len(answer.source.split()) >= 40 and "BEGIN SOLUTION" not in answer.source, gid


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_model_answers_never_reach_the_student_notebook(assignment):
    """The written answers' model answers are whole markdown cells, not regions between solution
    delimiters: release must replace them, and nothing of them may reach exercises/."""
    exercise = (REPO / "exercises" / assignment / f"{notebook(assignment).path.name}").read_text()
    released = {c["metadata"].get("nbgrader", {}).get("grade_id"): c for c in json.loads(exercise)["cells"]}
    for gid, model in written_answers(assignment).items():
        assert "".join(released[gid]["source"]).strip() == "YOUR ANSWER HERE", gid
        lines = [line.strip() for line in model.splitlines() if len(line.strip()) > 20]
        assert lines and not [line for line in lines if json.dumps(line)[1:-1] in exercise], gid


def is_setup_guard(statement: ast.stmt, check: str) -> bool:
    """``if "<check>" not in globals(): raise NameError("...")``: what a visible test cell says
    when the setup cell has not run in the kernel (in the grader's process, the check is there)."""
    return (isinstance(statement, ast.If) and not statement.orelse and len(statement.body) == 1
            and ast.dump(statement.test) == ast.dump(ast.parse(f"{check!r} not in globals()", mode="eval").body)
            and isinstance(raised := statement.body[0], ast.Raise) and isinstance(raised.exc, ast.Call)
            and isinstance(raised.exc.func, ast.Name) and raised.exc.func.id == "NameError"
            and [type(a) for a in raised.exc.args] == [ast.Constant] and "run that cell first" in raised.exc.args[0].value)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_test_cells_hold_only_literal_cases_and_one_check(assignment):
    """A comment, optionally names bound to literal lists of case dicts, and one check call of
    the student's object as the last expression, using no other name of the notebook: the
    grader re-runs exactly this code in its own process. A visible test cell first says to run
    the setup cell where its check is missing (a kernel restarted, the setup cell skipped)."""
    for gid, cell in notebook(assignment).tests.items():
        tree = ast.parse(cell.source)
        function, _ = called_check(cell.source)
        guard = [statement for statement in tree.body if is_setup_guard(statement, function)]
        assert len(guard) == ("HIDDEN" not in cell.source), (gid, "a visible test cell guards its check once")
        *assignments, last = [statement for statement in tree.body if statement not in guard]
        bound = set()
        for statement in assignments:
            assert isinstance(statement, ast.Assign) and len(statement.targets) == 1, gid
            assert isinstance(statement.targets[0], ast.Name) and isinstance(statement.value, ast.List), gid
            bound.add(statement.targets[0].id)
        function, student = called_check(cell.source)
        call = last.value
        assert len(call.args) == 1 and {k.arg for k in call.keywords} == {"points", "cases"}, gid
        names = {n.id for statement in assignments + [last] for n in ast.walk(statement) if isinstance(n, ast.Name)}
        assert names <= {function, student, "dict"} | bound, (gid, names)
        for node in ast.walk(tree):  # every case is dict(key=literal, ...)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
                assert not node.args, gid
                for keyword in node.keywords:
                    ast.literal_eval(keyword.value)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_visible_text_shows_no_solution_or_hidden_line(assignment):
    """The instructions and visible tests reach every student (and every feedback page)."""
    nb = notebook(assignment)
    visible = "\n".join(c.source for c in nb.nb.cells
                        if (c.cell_type == "markdown" and not _nbgrader(c).get("solution"))  # not an answer
                        or (_nbgrader(c).get("grade_id") in nb.tests and "HIDDEN" not in c.source))
    secrets = secret_lines(assignment)
    assert all(line in secrets for answer in nb.written.values()  # the model answers are secrets too
               for line in answer.source.splitlines() if len(line.strip()) > 20)
    assert not [line for line in secrets if line in visible]


# Each assignment's reference solution through its test cells in a Python of its own, forked
# from one that has imported only what a fresh kernel has (PyTorch, the checks): this test
# process has long imported what the checks' first runs could import lazily (torch._dynamo,
# whose import runs PyTorch's private modules under the checks' watch of the student's calls).
FRESH_KERNELS = """
import json, sys
from multiprocessing import get_context
from classroom.notebook import SourceNotebook

def grade(assignment):
    before = "torch._dynamo" in sys.modules
    graded = SourceNotebook(assignment).grade_all()
    return before, graded, "torch._dynamo" in sys.modules

with get_context("fork").Pool(1, maxtasksperchild=1) as pool:  # a new child for each
    graded = dict(zip(sys.argv[1:], pool.map(grade, sys.argv[1:], chunksize=1)))
print("GRADED " + json.dumps(graded))
"""


def in_fresh_kernels(recording: bool) -> dict[str, tuple[bool, dict, bool]]:
    """assignment -> (torch._dynamo imported before, its test cells' points and messages, after),
    in a student's kernel (the checks judge) or a grading kernel's (they record)."""
    env = {k: v for k, v in os.environ.items() if k != RECORD_VARIABLE}
    process = subprocess.run([sys.executable, "-c", FRESH_KERNELS, *ASSIGNMENTS], cwd=REPO, capture_output=True,
                             text=True, timeout=600, env=dict(env, PYTHONPATH=str(REPO),
                                                              **({RECORD_VARIABLE: "1"} if recording else {})))
    assert process.returncode == 0, process.stderr[-3000:]
    return json.loads(process.stdout.split("GRADED ", 1)[1])


@pytest.fixture(scope="module")
def graded_in_fresh_kernels() -> dict:
    return in_fresh_kernels(recording=False)


# 11's contract hands train_step a torch.optim optimiser and trains the student's GPT with AdamW:
# constructing any torch.optim optimiser imports torch._dynamo, so its kernels pay that second
OPTIMISERS = {"11-your-gpt"}


@pytest.mark.slow
def test_grading_kernels_never_load_torch_dynamo():
    """The fork server leaves torch._dynamo out of what it preloads (0.8 s of every sandbox's
    start): a check that loads it makes every kernel load it (PyTorch wraps a dispatch mode's
    __torch_dispatch__ for torch.compile, and runs meta kernels written in Python through it).
    Only an assignment whose checks hand over a torch.optim optimiser loads it, and only then."""
    for assignment, (before, _, after) in in_fresh_kernels(recording=True).items():
        assert not before, f"{assignment}: torch._dynamo was loaded before its checks ran"
        assert after == (assignment in OPTIMISERS), f"{assignment}: its checks' runs load torch._dynamo: {after}"


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_reference_solution_gets_full_marks(assignment, graded_in_fresh_kernels):
    """Every autograded test cell, in a fresh kernel (the written answers are graded by hand:
    tests/test_grading.py and tests/test_manual_grading.py hold their points as pending, never lost)."""
    nb = notebook(assignment)
    dynamo_imported_before, graded, _ = graded_in_fresh_kernels[assignment]
    assert not dynamo_imported_before, "not a fresh kernel: the imports of its parent took torch._dynamo"
    assert set(graded) == set(nb.tests) and not set(graded) & set(nb.written)
    for gid, (points, message) in graded.items():
        assert points == nb.points(gid), (gid, message)
        assert message.startswith("✓"), message


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_stub_gets_zero_in_every_test_cell(assignment):
    nb = notebook(assignment)
    for gid, (points, message) in nb.grade_all(nb.stubs()).items():
        assert points == 0, gid
        assert "not implemented" in message.lower(), message


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_corpus_is_big_enough(assignment):
    """At least 2 correct-but-unusual students and 4 realistic buggy ones for every graded name."""
    entries = load_corpus(assignment, cli=True)
    for name in notebook(assignment).solutions:
        touching = [e for e in entries if name in e.cells]
        assert sum(e.expect == "full" for e in touching) >= 2, name
        assert sum(e.expect == "partial" for e in touching) >= 4, name


def in_process_sample(assignment: str) -> list:
    """For each graded function, its first correct and its first buggy corpus student (by name).

    The real CLI grades every corpus student (tests/test_grading.py). A student's own notebook
    judges with the same answers and reports (attention_checks.answers), reached in-process
    instead of through a record: one correct and one buggy student per function take every
    check through that path, without grading the whole corpus a second time."""
    entries = [e for e in load_corpus(assignment) if not e.added]
    sample = {}
    for function in notebook(assignment).solutions:
        for expect in ("full", "partial"):
            first = next((e for e in entries if e.expect == expect and function in e.cells), None)
            if first is not None:
                sample[first.name] = first
    return list(sample.values())


CORPUS = [(a, e) for a in ASSIGNMENTS for e in in_process_sample(a)]


@pytest.mark.slow
@pytest.mark.parametrize("assignment, entry", CORPUS, ids=[f"{a}/{e.name}" for a, e in CORPUS])
def test_corpus_student_in_process(assignment, entry):
    """A sampled simulated student scores as its file declares, judged in-process, and a
    buggy one sees its hint."""
    assert notebook(assignment).corpus_problem(entry) is None


# --------------------------------------------------------------------------
# the declared checks


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.name)
def test_every_declared_check_has_answers_for_its_outputs(check):
    module = importlib.import_module(check.inputs.__module__)
    assert getattr(module, check.function_name) is check, "a test cell imports it by its function name"
    assert check.assignment in ASSIGNMENTS
    case = judged(check, {})
    assert set(case.expected) == set(check.outputs)
    assert callable(answer_for(check).mistakes)


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.name)
def test_inputs_are_deterministic_and_leave_the_global_rng_alone(check):
    state = torch.random.get_rng_state()
    first, second = check.build({}), check.build({})
    assert torch.equal(torch.random.get_rng_state(), state)
    for name, value in first.named.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(value, second.named[name]), name
        else:
            assert value == second.named[name], name


# A grading kernel stand-in: the checks in RECORD mode, the answers unimportable, and each
# student object a spy that collects every tensor it can reach (the garbage collector's
# objects and every frame of the stack) the first time the check calls it.
SPY = r'''
import gc, json, os, sys
sys.modules["attention_checks.answers"] = None  # as in the sandbox: an empty folder
import torch
from attention_checks import registry
found = []

class Spy:
    def __call__(self, *args, **kwargs):
        # the checks' call watch (a profile hook) sees every C call the scan below makes: off
        # while it runs, it finds the same tensors five times faster
        hook = sys.getprofile()
        sys.setprofile(None)
        try:
            self.collect()
        finally:
            sys.setprofile(hook)
        raise RuntimeError("spy")

    def collect(self):
        seen = [o for o in gc.get_objects() if isinstance(o, torch.Tensor)]
        frame = sys._getframe()
        while frame is not None:
            for value in list(frame.f_locals.values()):
                items = value.values() if isinstance(value, dict) else getattr(value, "__dict__", {}).values()
                seen += [v for v in [value, *items] if isinstance(v, torch.Tensor)]
            frame = frame.f_back
        copies = set(map(id, found))  # the spy's own copies are tensors too: not again
        found.extend(t.detach().to("cpu", torch.float64) for t in {id(t): t for t in seen}.values()
                     if id(t) not in copies and t.is_floating_point() and t.numel() > 1)

registry.load_all()
calls = json.loads(sys.argv[1])
for function, cases in calls:
    registry.REGISTRY[function].run(Spy(), points=1, cases=cases, mode=registry.Mode.RECORD)
assert not any(name.startswith("attention_checks.answers.") for name in sys.modules)
torch.save(found, sys.argv[2])
'''


@pytest.mark.slow
@pytest.mark.parametrize("assignment", [a for a in ASSIGNMENTS if declared(a)])
def test_a_recording_kernel_never_holds_an_answer(assignment, tmp_path):
    """Issue 12, finding 1: while a grading kernel runs the checks, no expected output exists
    in it, and the answers are never imported."""
    nb = notebook(assignment)
    calls = [(called_check(c.source)[0], nb.cases(gid)) for gid, c in nb.tests.items()]
    out = tmp_path / "found.pt"
    env = dict(os.environ, ATTENTION_CHECKS_RECORD="1", PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", SPY, json.dumps(calls), str(out)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = torch.load(out)
    assert found, "the spy saw no tensor at all: it did not run"
    for function, cases in calls:
        check = registry.REGISTRY[function]
        for case in cases:
            c = judged(check, case)
            inputs = [v for v in c.x.named.values() if isinstance(v, torch.Tensor)]
            for name, expected in c.expected.items():
                if not isinstance(expected, torch.Tensor) or expected.numel() <= 1 or not expected.is_floating_point():
                    continue
                if any(i.shape == expected.shape and torch.allclose(i.double(), expected) for i in inputs):
                    continue  # the answer is one of the inputs: nothing to steal
                leaked = [t for t in found if t.shape == expected.shape and torch.allclose(t, expected, atol=1e-4)]
                assert not leaked, f"{function} {case}: the kernel held the expected {name}"
