"""Hostile notebooks of the fourth round (issue 49), graded by the real CLI beside their honest
twins, as in test_hostile.py: an attack never earns more than its twin.

Student code in a grading kernel runs in one thread of one process, as the operating system
enforces it (a seccomp filter, ``forkserver.forbid_new_threads_and_processes``): the checks'
watches are per thread, and a thread, a forked child or a subprocess ran out of their sight.
"""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from classroom import load_corpus, reaches_past_the_allowlist
from test_hostile import Attack, code
from test_hostile_round3 import OPTIONS, _after, check_attacks, graded, shown_to_student

pytestmark = pytest.mark.slow  # runs kernels and the CLI

# PyTorch's own attention, by a name no source scan reads; each route below runs it out of the
# sight of the checks' per-thread watches, or would, if it could start
FUSED = 'import torch, torch.nn.functional as F\n_fused = getattr(F, "scaled_dot_product" + "_attention")\n'
THREAD_SDPA = FUSED + code("""
    import threading
    def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
        found = []
        def work():  # a new thread: no TorchFunctionMode, no profile hook there
            out = _fused(query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale)
            found.append((out, torch.ones(*query.shape[:-1], key.shape[-2]).softmax(-1)))
        worker = threading.Thread(target=work)
        worker.start()
        worker.join()
        return found[0]""")
# a worker started in the solution cell, before any check, fed through queues
WORKER_SDPA = FUSED + code("""
    import queue, threading
    _jobs, _done = queue.Queue(), queue.Queue()
    def _serve():
        while True:
            a, k = _jobs.get()
            _done.put(_fused(*a, **k))
    threading.Thread(target=_serve, daemon=True).start()
    def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
        _jobs.put(((query, key, value), dict(attn_mask=attn_mask, is_causal=is_causal, scale=scale)))
        return _done.get(), torch.ones(*query.shape[:-1], key.shape[-2]).softmax(-1)""")
FORK_SDPA = FUSED + code("""
    import os, pickle
    def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
        read, write = os.pipe()
        if os.fork() == 0:  # the child computes, the parent only reads the pipe
            out = _fused(query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale)
            os.write(write, pickle.dumps(out))
            os._exit(0)
        os.close(write)
        data = b""
        while chunk := os.read(read, 1 << 16):
            data += chunk
        return pickle.loads(data), torch.ones(*query.shape[:-1], key.shape[-2]).softmax(-1)""")
SUBPROCESS = code("""
    import subprocess, sys
    ran = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True)
    print("SUBPROCESS", ran.stdout)""")



def first_cell(source: str):
    """A cell of the student's own right after the setup cell, before any hidden test: its output is shown."""
    return lambda nb: _after("setup", nb, [source])


# issue 49, item 5: a correct scaled_dot_product_attention of public functions, torch.broadcast_shapes
# and torch.baddbmm, whose Python runs PyTorch's private code underneath (torch._refs): full marks
BADDBMM = code("""
    def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
        L, S, E = query.size(-2), key.size(-2), query.size(-1)
        scale = 1 / math.sqrt(E) if scale is None else scale
        bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)
        if is_causal:
            bias = bias.masked_fill(~torch.ones(L, S, dtype=torch.bool, device=query.device).tril(), float("-inf"))
        if attn_mask is not None:
            bias = bias.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else bias + attn_mask
        lead = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], bias.shape[:-2])
        q = query.expand(*lead, L, E).reshape(-1, L, E)
        k = key.expand(*lead, S, E).reshape(-1, S, E)
        v = value.expand(*lead, S, value.size(-1)).reshape(-1, S, value.size(-1))
        b = bias.expand(*lead, L, S).reshape(-1, L, S)
        weights = torch.baddbmm(b, q, k.transpose(1, 2), alpha=scale).softmax(-1)
        return torch.bmm(weights, v).reshape(*lead, L, -1), weights.reshape(*lead, L, S)""")

SPAWN_ATTACKS = [
    Attack("thread_per_call", "computes in a thread of its own", THREAD_SDPA, twin="wrong", expect="at_most"),
    Attack("worker_thread", "computes in a worker thread started before the checks", WORKER_SDPA, twin="wrong",
           expect="at_most"),
    Attack("forked_child", "computes in a forked child", FORK_SDPA, twin="wrong", expect="at_most"),
    Attack("subprocess", "runs another program", twin="reference", tamper=first_cell(SUBPROCESS)),
    Attack("thread_in_a_cell", "starts a thread", twin="reference",
           tamper=first_cell("import threading\nthreading.Thread(target=print).start()")),
    Attack("public_baddbmm", "writes attention with torch.baddbmm", BADDBMM, twin="reference"),
    # an honest student who asks PyTorch for threads keeps full marks: PyTorch stays at one
    Attack("set_num_threads", "asks for four threads", code("""
        import torch
        torch.set_num_threads(4)
        torch.randn(300, 300) @ torch.randn(300, 300)"""), twin="reference"),
]


@pytest.fixture(scope="module")
def spawns(tmp_path_factory):
    return graded(tmp_path_factory, "spawns", SPAWN_ATTACKS)


@pytest.mark.parametrize("attack", SPAWN_ATTACKS, ids=lambda a: a.name)
def test_student_code_runs_in_one_thread_of_one_process(spawns, attack):
    check_attacks(spawns, attack)


def test_each_route_fails_in_the_students_cell(spawns):
    """The attempt is the student's error, said where it happened; honest work keeps full marks."""
    for honest in ("set_num_threads", "public_baddbmm"):
        assert spawns.score(honest) == spawns.score("twin-reference") == float(
            spawns.row("twin-reference")["max_score"])
    assert "RuntimeError: can't start new thread" in shown_to_student(spawns, "thread_in_a_cell")
    assert "PermissionError: [Errno 1] Operation not permitted" in shown_to_student(spawns, "subprocess")
    assert "SUBPROCESS" not in shown_to_student(spawns, "subprocess").replace('print("SUBPROCESS"', "")


FILTER_PROBE = """
import os, sys, threading
sys.path.insert(0, sys.argv[1])
import forkserver
other = threading.Thread(target=threading.Event().wait, args=(5,), daemon=True)
other.start()  # a thread that runs before the filter: it gets the filter too (TSYNC)
print("INSTALLED", forkserver.forbid_new_threads_and_processes())
tasks = os.listdir("/proc/self/task")
print("TASKS", sorted(forkserver.confinement(f"{os.getpid()}/task/{tid}")["seccomp"] for tid in tasks))
for name, start in [("thread", lambda: threading.Thread(target=print).start()), ("fork", os.fork),
                    ("spawn", lambda: os.posix_spawn("/bin/true", ["true"], {}))]:
    try:
        start()
        print(name, "STARTED")
    except (RuntimeError, OSError) as error:
        print(name, type(error).__name__, error)
import torch
x = torch.randn(64, 64, requires_grad=True)
(x @ x).softmax(-1).sum().backward()  # autograd on the CPU needs no thread
print("BACKWARD", x.grad.shape)
"""


def test_the_filter_holds_for_every_thread_and_leaves_pytorch_working():
    from autograder.sandbox.bwrap import FORKSERVER

    run = subprocess.run([sys.executable, "-c", FILTER_PROBE, str(FORKSERVER.parent)], capture_output=True, text=True,
                         timeout=120, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr[-2000:]
    out = run.stdout
    if "INSTALLED False" in out:
        pytest.skip("this Linux refuses seccomp filters: the grader reads threads and processes after each cell")
    assert re.search(r"TASKS \[2, 2\]", out), out  # both threads filtering (2: SECCOMP_MODE_FILTER)
    assert "thread RuntimeError can't start new thread" in out, out
    assert "fork PermissionError" in out and "spawn PermissionError" in out, out
    assert "STARTED" not in out and "BACKWARD torch.Size([64, 64])" in out, out


THREAD_CELL = "import threading, time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()"


@pytest.mark.parametrize("one_thread", [True, False], ids=["filtered", "unfiltered"])
def test_the_grader_reads_threads_from_outside_the_kernel(tmp_path, one_thread):
    """Under the filter the cell's thread never starts: its error is the cell's, and the notebook
    runs on. Where the kernel has no filter (Linux refused it; here the setting that tests the
    layers below), the fork server sees the new thread when the cell ends: the notebook stops
    there with that reason, so that no test runs beside it."""
    from autograder.results import observed, observed_status
    from test_sandbox import run_notebook

    nb = run_notebook(tmp_path, [THREAD_CELL, "print(6 * 7)"], one_thread=one_thread)
    if one_thread:
        assert nb.cells[0].outputs[0].evalue == "can't start new thread"
        assert nb.cells[1].outputs[0].text == "42\n" and observed_status(nb) == ("ok", "")
    else:
        assert observed(nb.cells[0]) == "spawned" and nb.cells[1].outputs == []
        status, reason = observed_status(nb)
        assert status == "error" and "started a thread or a process" in reason


def test_large_outputs_still_reach_the_grader_under_the_filter(tmp_path):
    """pyzmq frees a message past 64 KiB in a thread it starts at the first one: the kernel starts
    it before its filter, or such an output would break the kernel's messages ("Invalid Signature")."""
    from autograder.results import observed
    from test_sandbox import run_notebook

    nb = run_notebook(tmp_path, ["print('y' * 300_000)", "from IPython.display import HTML\nHTML('z' * 200_000)",
                                 "print(6 * 7)"])
    assert [observed(cell) for cell in nb.cells] == [None] * 3
    assert len(nb.cells[0].outputs[0].text) == 300_001 and "z" * 200_000 in nb.cells[1].outputs[0].data["text/html"]
    assert nb.cells[2].outputs[0].text == "42\n"


# --------------------------------------------------------------------------------------------
# forbidden by operator (items 3 and 5): in the kernel, no grading needed

# flash_attention by PyTorch's fused multi-head attention operator, one head and identity weights:
# the whole (L, S) matrix of attention weights is its second output
NATIVE_MHA_FLASH = """
def flash_attention(q, k, v, block_size, causal=False):
    *lead, L, E = q.shape
    S, eye = k.shape[-2], torch.eye(E, dtype=q.dtype)
    out, weights = torch._native_multi_head_attention(
        q.reshape(-1, L, E), k.reshape(-1, S, E), v.reshape(-1, S, E), E, 1, torch.cat([eye, eye, eye]),
        torch.zeros(3 * E, dtype=q.dtype), eye, torch.zeros(E, dtype=q.dtype),
        torch.ones(L, S, dtype=torch.bool).triu(1) if causal else None, True, True, 0 if causal else None)
    return out.reshape(*lead, L, E)
"""


def _flash(source: str):
    import torch

    namespace = {"torch": torch, "math": __import__("math")}
    exec(source, namespace)  # noqa: S102 - the test's own student code
    return namespace["flash_attention"]


def test_a_fused_attention_operator_is_forbidden_and_its_weights_measured():
    import torch

    from attention_checks.attention_at_scale import check_flash_attention
    from attention_checks.probe import probe_all
    from classroom import reference_code

    cases = [dict(), dict(causal=True, L=13)]  # (the fused operator takes L == S only)
    cheat = probe_all(check_flash_attention, _flash(NATIVE_MHA_FLASH), cases, torch.device("cpu"))
    assert cheat.forbidden == ["torch._native_multi_head_attention"]
    assert all("NotBlockwise" in outcome.error for outcome in cheat.outcomes), cheat.outcomes
    honest = probe_all(check_flash_attention, _flash(reference_code("09-attention-at-scale")["flash_attention"]),
                       cases, torch.device("cpu"))
    assert honest.forbidden == [] and [o.error for o in honest.outcomes] == [None, None]


def test_public_functions_running_private_code_are_the_students_call():
    """torch.broadcast_shapes runs torch._refs itself: not the student's use of it; a private
    implementation handed to torch.vmap still is (tests/test_check_machinery.py)."""
    import torch

    from attention_checks.core import PRIVATE_IMPLEMENTATIONS, ForbiddenCalls

    with ForbiddenCalls({}) as guard:
        torch.broadcast_shapes((2, 1, 3), (4, 3))
        torch.baddbmm(torch.zeros(2, 3, 3), torch.randn(2, 3, 4), torch.randn(2, 4, 3), alpha=0.5)
    assert guard.seen == []
    import importlib

    softmax = vars(importlib.import_module("torch._" + "decomp.decompositions"))["_softmax"]
    with ForbiddenCalls({}) as guard:
        torch.vmap(softmax, in_dims=(0, None, None))(torch.randn(2, 3, 4), -1, False)
    assert guard.seen == [PRIVATE_IMPLEMENTATIONS]


# --------------------------------------------------------------------------------------------
# streaming judged from outside the kernel (item 2): flash_attention's long case, graded by the CLI

# the corpus student that holds the whole (L, S) score matrix (and renamed, for the attacks)
FULL_MATRIX_STUDENT = next(e for e in load_corpus("09-attention-at-scale", cli=True)
                           if e.name == "flash_full_scores").cells["flash_attention"]
FULL_MATRIX = FULL_MATRIX_STUDENT.replace("def flash_attention(", "def full_attention(") + "\n"
# the honest reference and the whole-matrix student, each graded this many times in one class
REGRADED = ["reference", "reference-again", "reference-once-more"]
# the checks' dispatch mode switched off by a name no source scan reads (decoded from bytes)
MODES_OFF = code("""
    import torch.utils._python_dispatch as _dispatch
    _off = getattr(_dispatch, bytes([95, 100, 105, 115, 97, 98, 108, 101, 95, 99, 117, 114, 114, 101, 110, 116,
                                     95, 109, 111, 100, 101, 115]).decode())""")
MEMORY_ATTACKS = {
    "modes_off_decoded": FULL_MATRIX + MODES_OFF + code("""
        def flash_attention(q, k, v, block_size, causal=False):
            with _off():
                return full_attention(q, k, v, block_size, causal)"""),
    # ... and by its name: the source scan finds it, outside the kernel
    "modes_off_named": FULL_MATRIX + code("""
        from torch.utils._python_dispatch import _disable_current_modes
        def flash_attention(q, k, v, block_size, causal=False):
            with _disable_current_modes():
                return full_attention(q, k, v, block_size, causal)"""),
    # the whole matrix written into a buffer made in the solution cell, before the test began (the
    # mode switched off too, or it would see the buffer)
    "buffer_made_before": MODES_OFF + code("""
        _buffer = torch.empty(2, 4096, 4096)
        _buffer.fill_(0.0)
        def flash_attention(q, k, v, block_size, causal=False):
            with _off():
                return _into_buffer(q, k, v, block_size, causal)
        def _into_buffer(q, k, v, block_size, causal=False):
            L, S = q.shape[-2], k.shape[-2]
            if q.dim() != 3 or q.dtype != _buffer.dtype or q.shape[0] * L * S > _buffer.numel():
                return streamed(q, k, v, block_size, causal)
            scores = _buffer.view(-1)[:q.shape[0] * L * S].view(q.shape[0], L, S)
            torch.matmul(q, k.transpose(-2, -1), out=scores)
            scores.mul_(1 / math.sqrt(q.shape[-1]))
            if causal:
                scores.masked_fill_(torch.ones(L, S, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
            scores.sub_(scores.amax(-1, keepdim=True)).exp_()
            return (scores / scores.sum(-1, keepdim=True)) @ v"""),
    # the whole matrix in numpy, which no PyTorch mode sees
    "numpy_matrix": code("""
        import numpy as np
        def flash_attention(q, k, v, block_size, causal=False):
            Q, K, V = (t.detach().double().numpy() for t in (q, k, v))
            s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
            if causal:
                s = np.where(np.triu(np.ones(s.shape[-2:], bool), 1), -np.inf, s)
            w = np.exp(s - s.max(-1, keepdims=True))
            return torch.from_numpy((w / w.sum(-1, keepdims=True)) @ V).to(q.dtype)"""),
}


@pytest.fixture(scope="module")
def streaming_class(tmp_path_factory):
    from classroom import Results, grade, make_submission, reference_code

    folder = tmp_path_factory.mktemp("streaming")
    root, out = folder / "submitted", folder / "out"
    streamed = reference_code(STREAMING)["flash_attention"].replace("def flash_attention(", "def streamed(")
    for name, source in MEMORY_ATTACKS.items():
        make_submission(root, name, STREAMING, {"flash_attention": streamed + "\n\n" + source})
    for copy in REGRADED:  # the same notebooks graded again, in turn
        make_submission(root, copy, STREAMING)
        make_submission(root, f"{copy}-whole-matrix", STREAMING, {"flash_attention": FULL_MATRIX_STUDENT})
    run = grade(root, out, *OPTIONS)
    assert run.returncode == 0, run.stderr[-3000:]
    return Results.read(out), out


STREAMING = "09-attention-at-scale"


def _flash_tests(results, student: str) -> dict[str, dict]:
    return {t["grade_id"]: t for t in results.notebooks[(student, STREAMING)]["tests"] if "flash" in t["grade_id"]}


def test_flash_attentions_memory_is_judged_from_outside_the_kernel(streaming_class):
    """The memory the long case used is read by the sandbox: a whole score matrix fails it however it
    was computed (its dispatch mode switched off, in numpy, in a buffer made before the test), and the
    honest twin keeps full marks."""
    import nbformat

    from autograder.results import memory_used

    results, out = streaming_class
    reference = _flash_tests(results, "reference")
    assert all(t["passed"] for t in reference.values()) and reference["test_flash_attention_memory"]["points"] == 3
    for name in ("modes_off_decoded", "numpy_matrix", "buffer_made_before"):
        tests = _flash_tests(results, name)
        memory = tests["test_flash_attention_memory"]
        if reaches_past_the_allowlist(out / "autograded" / name / STREAMING / "attention_at_scale.ipynb"):
            # its mode switch is outside the allowlist: nothing earned, said as such
            assert all(t["points"] == 0 and "may not use" in t["message"] for t in tests.values()), tests
            continue
        assert memory["points"] == 0 and "MiB of memory, measured from outside" in memory["message"], memory
        # the mode switched off (or never seeing numpy), the other cells' values pass: only the
        # memory measured outside tells the whole matrix
        assert all(t["passed"] for gid, t in tests.items() if gid != "test_flash_attention_memory"), tests
        assert float(results.grades[(name, STREAMING)]["score"]) == float(
            results.grades[("reference", STREAMING)]["score"]) - 3


def _long_case_used(out, student: str) -> int:
    import nbformat

    from autograder.results import memory_used

    nb = nbformat.read(out / "autograded" / student / STREAMING / "attention_at_scale.ipynb", 4)
    (long_case,) = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_flash_attention_memory"]
    return memory_used(long_case)


def test_the_long_cases_verdict_is_the_same_at_every_grading(streaming_class):
    """The same notebook, byte for byte, graded again gets the same verdict, by a wide margin: block by
    block under half the case's 48 MiB each time (13-15 MiB, most of it the interpreter's own objects
    read on the way), the whole score matrix past twice it (387 MiB). benchmarks/long_case.py grades
    them more often."""
    results, out = streaming_class
    bound = 48 * 2**20
    for student, points, within in (("", 3, lambda used: used < bound / 2),
                                    ("-whole-matrix", 0, lambda used: used > 2 * bound)):
        copies = [f"{copy}{student}" for copy in REGRADED]
        submitted = {(out.parent / "submitted" / c / STREAMING / "attention_at_scale.ipynb").read_bytes()
                     for c in copies}
        used = [_long_case_used(out, c) for c in copies]
        verdicts = [_flash_tests(results, c)["test_flash_attention_memory"]["points"] for c in copies]
        assert len(submitted) == 1 and verdicts == [points] * len(copies) and all(map(within, used)), (
            copies, verdicts, used)


def test_switching_the_checks_modes_off_by_name_is_forbidden(streaming_class):
    from attention_checks.core import MODES_SWITCHED_OFF

    results, _ = streaming_class
    tests = _flash_tests(results, "modes_off_named")
    assert all(t["points"] == 0 for t in tests.values()), tests
    assert all(MODES_SWITCHED_OFF in t["message"] and "_disable_current_modes" in t["message"]
               for t in tests.values()), tests
