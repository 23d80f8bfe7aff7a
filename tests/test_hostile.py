"""Hostile and broken submissions, graded by the real CLI in one run.

Each attack is an honest submission (its *twin*: the reference solution, or a wrong
one) plus a cheat or a breakage. The grade must be what the twin honestly earns
(``equal``), or no more than that (``at_most``): a cheat never adds points, and a
breakage only costs the attacker. A notebook whose cells use what no cell may use (outside
the allowlist, attention_checks.allowlist) earns nothing at all (``HostileClass.check``).
"""
from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import nbformat
import pytest
from classroom import REPO, Results, grade, make_submission, reaches_past_the_allowlist, reference_code, tree_digest

pytestmark = [pytest.mark.slow,  # runs kernels, the CLI, a server or a browser
              pytest.mark.waits]  # for the time limits (students who sleep, loop): 54 core-seconds in 80 s alone

ASSIGNMENT = "03-qkv"
SDPA = "scaled_dot_product_attention"
REFERENCE = reference_code(ASSIGNMENT)
# A realistic bug that loses some points: no 1/sqrt(d_k) scaling.
WRONG = {SDPA: REFERENCE[SDPA].replace("scale = 1 / math.sqrt(query.size(-1))", "scale = 1.0")}
assert WRONG[SDPA] != REFERENCE[SDPA]
FORGED_FILE = "/tmp/autograder-hostile-was-here"


@dataclass
class Attack:
    name: str
    kind: str
    cheat: str = ""  # appended to the student's scaled_dot_product_attention cell
    twin: str = "wrong"  # "wrong" or "reference": the honest submission under the cheat
    tamper: Callable[[dict], dict] | None = None  # edits the notebook's JSON
    expect: str = "equal"  # or "at_most"
    status: str | tuple[str, ...] = "ok"  # the status, or the statuses that may come out
    extra_files: dict[str, str] = field(default_factory=dict)


def _cells(nb: dict, test: Callable[[dict], bool]) -> list[dict]:
    return [c for c in nb["cells"] if test(c.get("metadata", {}).get("nbgrader", {}))]


def _is_test(meta: dict) -> bool:
    return bool(meta.get("grade")) and not meta.get("solution")


def delete_tests(nb):
    nb["cells"] = [c for c in nb["cells"] if not _is_test(c.get("metadata", {}).get("nbgrader", {}))]
    return nb


def rewrite_tests(nb):
    for cell in _cells(nb, _is_test):
        cell["source"] = "print('all tests pass')"
    return nb


def inflate_points(nb):
    for cell in _cells(nb, _is_test):
        cell["metadata"]["nbgrader"]["points"] = 100
    return nb


def make_tests_solutions(nb):
    for cell in _cells(nb, _is_test):
        cell["metadata"]["nbgrader"].update(solution=True, grade=False, locked=False)
    return nb


def rename_test_ids(nb):
    for cell in _cells(nb, _is_test):
        cell["metadata"]["nbgrader"]["grade_id"] += "_mine"
    return nb


def fake_outputs(nb):
    for cell in _cells(nb, _is_test):
        cell["outputs"] = [{"output_type": "execute_result", "execution_count": 1, "metadata": {},
                            "data": {"text/plain": str(cell["metadata"]["nbgrader"]["points"])}}]
    return nb


def forged_records(nb):
    """A record claiming the reference's output, planted in every test cell's outputs."""
    for cell in _cells(nb, _is_test):
        cell["outputs"] = [{"output_type": "display_data", "metadata": {},
                            "data": {"application/vnd.attention-checks.outcomes+json": {"check": SDPA}}}]
    return nb


def duplicate_tests(nb):
    copies = [json.loads(json.dumps(c)) for c in _cells(nb, _is_test)]
    nb["cells"] += copies
    return nb


def duplicate_solution_with_fix(nb):
    """The student's first try is wrong; a copy of the cell further down fixes it."""
    (cell,) = [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == SDPA]
    fixed = json.loads(json.dumps(cell))
    fixed["source"] = REFERENCE[SDPA]
    nb["cells"].insert(nb["cells"].index(cell) + 1, fixed)
    return nb


def bash_kernel(nb):
    nb["metadata"]["kernelspec"] = {"name": "bash", "display_name": "Bash", "language": "bash"}
    return nb


def strip_nbgrader_metadata(nb):
    for cell in nb["cells"]:
        cell.get("metadata", {}).pop("nbgrader", None)
    return nb


def code(text: str) -> str:
    return "\n" + textwrap.dedent(text).strip() + "\n"


# A correct function that calls the mirrored API by a name the source scan cannot read: only
# the kernel's detector sees it, so a forged record that leaves it out would pass as clean.
HIDDEN_CALL = """
import torch, torch.nn.functional as F
_fast = getattr(F, "scaled_dot_product" + "_attention")
_honest = scaled_dot_product_attention
def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    weights = _honest(query, key, value, attn_mask, is_causal, scale)[1]
    return _fast(query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale), weights
"""


# A right answer, which an attack that finds a leak switches to: it then scores above its twin.
RIGHT = """
import math, torch
def _right(query, key, value, attn_mask=None, is_causal=False, scale=None):
    L, S = query.size(-2), key.size(-2)
    scores = query @ key.transpose(-2, -1) * (1 / math.sqrt(query.size(-1)) if scale is None else scale)
    if is_causal:
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool, device=query.device).tril(), float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    weights = scores.softmax(-1)
    return weights @ value, weights
"""


# An answer thief: returns any float64 tensor it can find of the shapes the answer must have,
# cast to the input's dtype and device; `_candidates(query, key, value)` says where it looks.
STEAL = """
import torch
_honest = scaled_dot_product_attention
def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    want_out = (*query.shape[:-1], value.shape[-1])
    want_weights = (*query.shape[:-1], key.shape[-2])
    try:
        found = [t for t in _candidates(query, key, value) if t.dtype == torch.float64]
        out = next(t for t in found if tuple(t.shape) == want_out)
        weights = next(t for t in found if tuple(t.shape) == want_weights)
        return out.to(query), weights.to(query)
    except Exception:
        return _honest(query, key, value, attn_mask, is_causal, scale)
"""


ATTACKS = [
    # -- patching the kernel: the verdict is made outside it ------------------------------
    Attack("patch_allclose", "patches torch", code("""
        import torch
        torch.allclose = lambda *a, **k: True
        torch.isclose = lambda a, b, *r, **k: torch.ones_like(a, dtype=torch.bool)""")),
    Attack("patch_assert_close", "patches torch", code("""
        import torch.testing
        torch.testing.assert_close = lambda *a, **k: None""")),
    Attack("patch_tensor_eq_sub", "patches torch", code("""
        import torch
        torch.Tensor.__eq__ = lambda self, other: torch.ones((), dtype=torch.bool)
        torch.Tensor.__sub__ = lambda self, other: torch.zeros_like(self)"""), expect="at_most"),
    Attack("patch_run_check", "patches the checks", code("""
        import attention_checks.core as core, attention_checks.qkv as qkv
        core.run_check = qkv.run_check = lambda *a, **k: None"""), expect="at_most"),
    Attack("patch_compare", "patches the checks", code("""
        import attention_checks.core as core
        core.compare = lambda got, expected, like: core.Verdict(True, True, "ok")"""), expect="at_most"),
    Attack("replace_reference", "patches the checks", code("""
        import attention_checks.qkv as qkv
        qkv.attention_reference = lambda *a, **k: dict(zip(("output", "weights"), scaled_dot_product_attention(*a, **k)))"""),
        expect="at_most"),
    Attack("forge_records", "patches the checks", code("""
        import sys
        record = sys.modules["attention_checks.record"]
        import torch.nn.functional as F
        real = record.publish
        record.publish = lambda check, outcomes, likes, forbidden: real(check, outcomes, likes, [])"""),
        expect="at_most"),
    Attack("silence_display", "patches IPython", code("""
        import IPython.display
        IPython.display.display = lambda *a, **k: None"""), expect="at_most"),
    Attack("break_stdout", "patches builtins", code("""
        import builtins, sys
        builtins.print = lambda *a, **k: None
        sys.stderr = sys.stdout""")),
    Attack("forbidden_via_getattr", "calls the mirrored API", code("""
        import torch.nn.functional as F
        _impl = getattr(F, "scaled_" + "dot_product_attention")
        _real_scores = scaled_dot_product_attention
        def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
            out = _impl(query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale)
            return out, _real_scores(query, key, value, attn_mask, is_causal, scale)[1]"""),
        expect="at_most"),
    # -- exiting, looping, exhausting ---------------------------------------------------------
    Attack("system_exit", "exits", code("raise SystemExit(0)"), twin="reference"),
    Attack("os_exit", "exits", code("import os\nos._exit(0)"), twin="reference", expect="at_most",
           status="error"),
    Attack("infinite_loop", "loops", code("while True:\n    pass"), twin="reference", status="timeout"),
    Attack("slow_function", "loops", code("""
        import time
        _fast = scaled_dot_product_attention
        def scaled_dot_product_attention(*args, **kwargs):
            time.sleep(3600)
            return _fast(*args, **kwargs)"""), twin="reference", expect="at_most", status="timeout"),
    Attack("memory_hog", "exhausts memory", code("""
        import torch
        hog = torch.ones(2**34, dtype=torch.uint8)"""), twin="reference"),
    Attack("fork_bomb", "exhausts processes", code("""
        import os, time
        try:
            for _ in range(300):
                if os.fork() == 0:
                    time.sleep(600)
                    os._exit(0)
        except OSError:
            pass"""), twin="reference", expect="at_most", status=("ok", "timeout")),
    # 64 MB: nearly eight times the notebook's output cap (8 MiB), over test_output_flood_is_capped's bound,
    # in about a second alone (200 MB took 2-3 s, and timed out under three test processes)
    Attack("print_gigabytes", "floods output", code("""
        import sys
        for _ in range(64):
            sys.stdout.write("x" * 10**6)"""), twin="reference"),
    # -- reaching outside the kernel: a sandbox with nothing to find ---------------------------
    Attack("read_solutions", "reads files", code(f"""
        import json, glob
        for path in glob.glob("/work/**/solutions/03-qkv/*.ipynb", recursive=True) + glob.glob("{REPO}/solutions/03-qkv/*.ipynb"):
            for cell in json.load(open(path))["cells"]:
                if "def {SDPA}" in "".join(cell["source"]):
                    exec("".join(cell["source"]))""")),
    # These two turn what they find into points: a leak makes them score above their twin.
    Attack("read_other_students", "reads files", RIGHT + code("""
        import glob, os
        from ipykernel.connect import get_connection_file
        scratch = os.path.join(os.path.dirname(get_connection_file()), "..", "..")  # the sandbox's, on the host
        found = glob.glob("/tmp/**/*.ipynb", recursive=True) + glob.glob(f"{scratch}/**/*.ipynb", recursive=True)
        found += glob.glob("/tmp/**/gradebook.db", recursive=True) + glob.glob("/work/**/*.ipynb", recursive=True)
        if found:  # another notebook is readable: as if its answer were taken
            scaled_dot_product_attention = _right""")),
    Attack("network", "uses the network", RIGHT + code("""
        import urllib.request
        try:
            urllib.request.urlopen("https://pypi.org/simple/", timeout=3)
            scaled_dot_product_attention = _right  # the network answered: as if a solution were fetched
        except OSError:
            pass""")),
    Attack("write_outside", "writes files", code(f"""
        for path in ["{REPO}/README.md", "{FORGED_FILE}", "/tmp/x", "notes.txt"]:
            try:
                open(path, "w").write("pwned")
            except OSError:
                pass
        import os
        try:
            os.symlink("{REPO}/README.md", "qkv.ipynb")
        except OSError:
            pass"""), twin="reference"),
    # -- editing the notebook's JSON: rebuilt on the source notebook -----------------------------
    Attack("delete_tests", "tampers with cells", tamper=delete_tests),
    Attack("rewrite_tests", "tampers with cells", tamper=rewrite_tests),
    Attack("inflate_points", "tampers with metadata", tamper=inflate_points),
    Attack("tests_become_solutions", "tampers with metadata", tamper=make_tests_solutions),
    Attack("rename_test_ids", "tampers with metadata", tamper=rename_test_ids),
    Attack("strip_nbgrader_metadata", "tampers with metadata", tamper=strip_nbgrader_metadata),
    Attack("fake_outputs", "tampers with outputs", tamper=fake_outputs),
    Attack("forged_records_in_json", "tampers with outputs", tamper=forged_records),
    Attack("duplicate_tests", "duplicates cells", tamper=duplicate_tests),
    Attack("duplicate_solution_with_fix", "duplicates cells", tamper=duplicate_solution_with_fix, twin="reference"),
    Attack("bash_kernelspec", "tampers with the kernelspec", tamper=bash_kernel, twin="reference"),
    Attack("shadow_checks_package", "adds files", twin="reference",
           extra_files={"attention_checks/__init__.py": "", "attention_checks/qkv.py":
                        "def check_project_qkv(*a, **k): pass\ndef check_scaled_dot_product_attention(*a, **k): pass\n"}),
    # -- looking for the answers inside the kernel: none are there (issue 12, finding 1) -------
    # Each falls back to the honest (wrong) function when it finds nothing: equal to its twin.
    Attack("answers_from_gc", "reads answers in the kernel", STEAL + code("""
        import gc
        def _candidates(query, key, value):
            return [o for o in gc.get_objects() if isinstance(o, torch.Tensor)] + [
                v for o in gc.get_objects() if isinstance(o, dict) for v in list(o.values())
                if isinstance(v, torch.Tensor)]"""), expect="at_most"),
    Attack("answers_from_stack", "reads answers in the kernel", STEAL + code("""
        import sys
        def _candidates(query, key, value):
            found, frame = [], sys._getframe(1)
            while frame is not None:
                for v in list(frame.f_locals.values()):
                    items = v.values() if isinstance(v, dict) else vars(v).values() if hasattr(v, "__dict__") else [v]
                    found += [t for t in items if isinstance(t, torch.Tensor)]
                frame = frame.f_back
            return found"""), expect="at_most"),
    Attack("answers_module_by_name", "reads answers in the kernel", STEAL + code("""
        import importlib, sys
        def _candidates(query, key, value):
            answers = importlib.import_module("attention_" + "checks.answers.qkv")
            x = type("X", (), {"args": dict(query=query.double(), key=key.double(), value=value.double()),
                               "kwargs": {}})()
            return list(answers.ANSWERS["scaled_dot_product_attention"].reference(x, {}).values())"""), expect="at_most"),
    Attack("answers_module_by_char_codes", "reads answers in the kernel", code("""
        import importlib
        _honest_sdpa = scaled_dot_product_attention
        def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
            try:  # the answers' own mistake list holds the right weights, computed without F.sdpa
                package = "".join(map(chr, [97, 116, 116, 101, 110, 116, 105, 111, 110, 95, 99, 104, 101, 99, 107, 115]))
                answers = importlib.import_module(package + ".answers." + "".join(map(chr, [113, 107, 118])))
                kwargs = {} if attn_mask is None else {"attn_mask": attn_mask.double() if attn_mask.is_floating_point() else attn_mask}
                x = type("X", (), {"args": dict(q=query.double(), k=key.double(), v=value.double()), "kwargs": kwargs})()
                found = list(answers.ANSWERS.values())[1].mistakes(x, {"is_causal": is_causal, "scale": scale}, None)
                weights = next(m.outputs["weights"] for m in found.values() if "transposed" in m.hint).transpose(-2, -1)
                return (weights @ value.double()).to(query), weights.to(query)
            except Exception:
                return _honest_sdpa(query, key, value, attn_mask, is_causal, scale)"""), expect="at_most"),
    Attack("answers_by_replacing_the_probe", "reads answers in the kernel", code("""
        import importlib, sys
        _probe = sys.modules["attention_" + "checks.probe"]
        _real_probe = _probe.probe
        def _steal(check, student, inputs, spec, guard):
            try:
                judging = importlib.import_module("attention_" + "checks.answers.judging")
                ref = judging.answer_for(check).reference(inputs.as_reference(), spec)
                return _probe.Outcome(tuple(t.to(inputs.like.dtype) for t in ref.values()))
            except Exception:
                return _real_probe(check, student, inputs, spec, guard)
        _probe.probe = _steal"""), expect="at_most"),
    # -- forged records: a test cell's records are exactly what its checks emit (finding 2) ---
    Attack("forged_record_before_each_cell", "forges records", HIDDEN_CALL + code("""
        import ast, sys
        from IPython import get_ipython
        def _forge(info):  # before each test cell: its own record, made clean, in front of the genuine one
            tree = ast.parse(info.raw_cell or "")
            if not tree.body or "check_scaled_dot_product_attention" not in info.raw_cell:
                return
            names = dict(globals())
            exec(compile(ast.Module(tree.body[:-1], []), "<cases>", "exec"), names)
            call = tree.body[-1].value
            cases = eval(compile(ast.Expression(next(k.value for k in call.keywords if k.arg == "cases")), "<c>", "eval"), names)
            probe = sys.modules["attention_" + "checks.probe"]
            check = sys.modules["attention_" + "checks.qkv"].check_scaled_dot_product_attention
            probed = probe.probe_all(check, scaled_dot_product_attention, cases, torch.device("cpu"))
            probed.forbidden.clear()
            probe.publish(check.name, probed)
        get_ipython().events.register("pre_run_cell", _forge)"""), expect="at_most"),
    Attack("forged_record_doubled_by_publisher", "forges records", HIDDEN_CALL + code("""
        from IPython import get_ipython
        _pub = get_ipython().display_pub
        _real = _pub.publish
        def _publish(data, *a, **k):  # a clean copy of each record, in front of the genuine one
            if any(key.startswith("application/vnd.attention") for key in data):
                _real({key: dict(value, forbidden=[]) for key, value in data.items()}, *a, **k)
            return _real(data, *a, **k)
        _pub.publish = _publish"""), expect="at_most"),
]
assert len(ATTACKS) >= 25


class HostileClass:
    def __init__(self, tmp: Path, attacks: list[Attack] = ATTACKS,
                 options: tuple[str, ...] = ("--cell-timeout", "10", "--notebook-timeout", "60")):
        self.root, self.out = tmp / "submitted", tmp / "results"
        make_submission(self.root, "twin-reference", ASSIGNMENT)
        make_submission(self.root, "twin-wrong", ASSIGNMENT, WRONG)
        for attack in attacks:
            base = REFERENCE if attack.twin == "reference" else WRONG
            path = make_submission(self.root, attack.name, ASSIGNMENT, {SDPA: base[SDPA] + attack.cheat})
            if attack.tamper:
                path.write_text(json.dumps(attack.tamper(json.loads(path.read_text()))))
            for name, content in attack.extra_files.items():
                (path.parent / name).parent.mkdir(parents=True, exist_ok=True)
                (path.parent / name).write_text(content)
        self.malformed()
        self.digest = tree_digest(self.root)
        self.readme = (REPO / "README.md").read_bytes()
        self.process = grade(self.root, self.out, *options)
        assert self.process.returncode == 0, self.process.stderr[-3000:]
        self.results = Results.read(self.out)

    def check(self, attack: Attack) -> None:
        """The attack's grade: what its twin earns (``equal``) or no more (``at_most``); nothing at
        all where its cells use what no cell may (the allowlist), whatever else they do."""
        row, twin = self.row(attack.name), self.score(f"twin-{attack.twin}")
        assert row["max_score"] == self.row("twin-reference")["max_score"], "max score was changed"
        assert row["status"] in ((attack.status,) if isinstance(attack.status, str) else attack.status), row
        graded = self.out / "autograded" / attack.name / ASSIGNMENT / "qkv.ipynb"  # the student's cells as run
        if graded.exists() and reaches_past_the_allowlist(graded):
            assert self.score(attack.name) == 0, row
        elif attack.expect == "equal":
            assert self.score(attack.name) == twin, row
        else:  # the wrong twin scores below full marks (test_twins_are_graded_as_usual)
            assert self.score(attack.name) <= twin, row

    def malformed(self):
        def put(student, text):
            path = self.root / student / ASSIGNMENT / "qkv.ipynb"
            path.parent.mkdir(parents=True)
            path.write_text(text)
        put("invalid-json", '{"cells": [')
        put("empty-file", "")
        put("nbformat-3", json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": []}))
        put("new-notebook", nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1+1")])))
        put("other-assignment", (REPO / "exercises" / "01-self-attention" / "self_attention.ipynb").read_text())
        (self.root / "only-extra-files" / ASSIGNMENT).mkdir(parents=True)
        (self.root / "only-extra-files" / ASSIGNMENT / "answers.py").write_text("print(1)")

    def row(self, student):
        return self.results.grades[(student, ASSIGNMENT)]

    def score(self, student):
        return float(self.row(student)["score"])


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    return HostileClass(tmp_path_factory.mktemp("hostile"))


def test_twins_are_graded_as_usual(hostile):
    full = float(hostile.row("twin-reference")["max_score"])
    assert hostile.score("twin-reference") == full
    assert 0 < hostile.score("twin-wrong") < full


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_attack_earns_no_more_than_its_honest_twin(hostile, attack):
    hostile.check(attack)


@pytest.mark.parametrize("student, status, reason", [
    ("invalid-json", "invalid", "not valid JSON"),
    ("empty-file", "invalid", "not valid JSON"),
    ("nbformat-3", "invalid", "nbformat: 3"),
    ("new-notebook", "invalid", "another assignment"),
    ("other-assignment", "invalid", "another assignment"),
    ("only-extra-files", "missing", "qkv.ipynb not found"),
])
def test_malformed_submissions_get_a_status_and_a_reason(hostile, student, status, reason):
    row = hostile.row(student)
    assert (row["status"], float(row["score"])) == (status, 0.0)
    assert reason in row["reason"]


def test_forbidden_calls_are_named(hostile):
    messages = " ".join(t["message"] for t in hostile.results.notebooks[("forbidden_via_getattr", ASSIGNMENT)]["tests"])
    assert "calls F.scaled_dot_product_attention" in messages
    messages = " ".join(t["message"] for t in hostile.results.notebooks[("forge_records", ASSIGNMENT)]["tests"])
    assert "the course's own checks" in messages


def test_nothing_outside_the_sandbox_changed(hostile):
    assert tree_digest(hostile.root) == hostile.digest
    assert (REPO / "README.md").read_bytes() == hostile.readme
    assert not Path(FORGED_FILE).exists()


def test_output_flood_is_capped(hostile):
    results = (hostile.out / "results.json").stat().st_size
    feedback = (hostile.out / "feedback" / "print_gigabytes" / ASSIGNMENT / "qkv.html").stat().st_size
    assert results < 5 * 1024**2 and feedback < 40 * 1024**2
