"""Hostile notebooks against the kernel's limits and its neighbours, graded by the real CLI
in one run with a single worker (``--jobs 1``), so that the students share one sandbox
and its warm fork server, one after another, as in a real class.

Each attack is an honest submission (its twin, as in test_hostile.py) plus a cheat: it
must never earn more than the twin, and the grading of everyone else goes on as usual.
"""
from __future__ import annotations

import html
import re
import textwrap
import threading

import nbformat
import psutil
import pytest

from autograder.engine.runner import MAX_ADDED_CELLS
from classroom import secret_lines
from test_hostile import ASSIGNMENT, REFERENCE, SDPA, Attack, HostileClass, code

pytestmark = [pytest.mark.slow,  # runs kernels, the CLI, a server or a browser
              pytest.mark.waits]  # for the time limits, with one worker: 30 core-seconds in 80 s alone

NOTEBOOK_TIMEOUT = 30


def cells_after_answer(source: str, count: int):
    """Adds ``count`` code cells right after the scaled_dot_product_attention cell, before its tests."""
    def tamper(nb):
        (cell,) = [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == SDPA]
        at = nb["cells"].index(cell) + 1
        nb["cells"][at:at] = [nbformat.v4.new_code_cell(source) for _ in range(count)]
        return nb
    return tamper


# Students graded one after another by one worker: the writer (a correct answer) leaves its
# code where the next kernel could find it; the reader (the wrong answer) runs what it finds.
CHANNEL = code(f"""
    import ctypes, os, zlib
    libc = ctypes.CDLL(None, use_errno=True)
    ANSWER = zlib.compress({REFERENCE[SDPA]!r}.encode())
    KEYRINGS = [-3, -4, -5, libc.syscall(250, 22, -1, -2)]  # session, user, user session, persistent""")
WRITE_FILES = CHANNEL + code("""
    for path in ["/dev/answer", "/dev/shm/answer", "/tmp/answer"]:
        try:
            open(path, "wb").write(ANSWER)
        except OSError:
            pass
    queue = libc.mq_open(b"/answer", os.O_CREAT | os.O_WRONLY, 0o666, None)
    libc.mq_send(queue, ANSWER, len(ANSWER), 0)""")
READ_FILES = CHANNEL + code("""
    for path in ["/dev/answer", "/dev/shm/answer", "/tmp/answer"]:
        if os.path.exists(path):
            exec(zlib.decompress(open(path, "rb").read()))
    queue, found = libc.mq_open(b"/answer", os.O_RDONLY | os.O_NONBLOCK), ctypes.create_string_buffer(8192)
    if queue >= 0 and libc.mq_receive(queue, found, 8192, None) > 0:
        exec(zlib.decompress(found.raw))""")
WRITE_KEYS = CHANNEL + code("""
    for keyring in KEYRINGS:
        libc.syscall(248, b"user", b"answer", ANSWER, len(ANSWER), keyring)  # add_key""")
READ_KEYS = CHANNEL + code("""
    for keyring in KEYRINGS:
        key, found = libc.syscall(250, 10, keyring, b"user", b"answer", 0), ctypes.create_string_buffer(65536)
        if key > 0 and libc.syscall(250, 11, key, found, 65536) > 0:  # keyctl search, read
            exec(zlib.decompress(found.raw))""")

def cell_at_the_end(source: str):
    def tamper(nb):
        nb["cells"].append(nbformat.v4.new_code_cell(textwrap.dedent(source)))
        return nb
    return tamper


# Everything a kernel remembers of the cells it ran, printed, raised and displayed after the tests.
PRINT_HISTORY = r"""
    import linecache, sys
    remembered = [*In, *_ih, *Out.values(), *_oh.values(), *[v for k, v in globals().items() if k.startswith("_i")],
                  *["".join(lines) for _, _, lines, *_ in linecache.cache.values()]]
    print(*remembered, sep="\n")
    print(*remembered, file=sys.stderr)
    from IPython.display import display, Markdown
    display(Markdown("\n".join(map(str, remembered))))
    raise RuntimeError("\n".join(map(str, remembered)))"""
# A hook installed before the tests sees each test cell compiled, and shows it wherever it can:
# in an output displayed before the hidden tests (updated later), in the test cells' own output,
# from a thread, and in every cell after.
HOOK_BEFORE_TESTS = code(r"""
    import sys, threading, time
    from IPython import get_ipython
    from IPython.display import display, update_display
    _seen = []
    sys.addaudithook(lambda event, args: _seen.append(str(args[0])) if event in ("compile", "exec") else None)
    display("a place to write to later", display_id="early")
    def _show(*_):
        update_display("\n".join(_seen), display_id="early")
        print("\n".join(_seen))
    get_ipython().events.register("post_run_cell", _show)
    def _thread():
        while True:
            time.sleep(0.05)
            print("\n".join(_seen[-3:]), file=sys.stderr)
    threading.Thread(target=_thread, daemon=True).start()""")

ATTACKS = [
    # -- hidden tests' code, read back from the kernel and shown in the feedback ------------
    Attack("leak_history_after_the_tests", "shows hidden tests", tamper=cell_at_the_end(PRINT_HISTORY),
           twin="reference"),
    Attack("leak_hook_before_the_tests", "shows hidden tests", HOOK_BEFORE_TESTS, twin="reference"),
    # -- one student's kernel talking to the next one's, in the same sandbox -----------------
    Attack("channel_files_1_writer", "talks to the next student", WRITE_FILES, twin="reference"),
    Attack("channel_files_2_reader", "talks to the next student", READ_FILES),
    Attack("channel_keys_1_writer", "talks to the next student", WRITE_KEYS, twin="reference"),
    Attack("channel_keys_2_reader", "talks to the next student", READ_KEYS),
    # -- time: the notebook's deadline stops it; only tests that finished count --------------
    Attack("many_cells_under_a_second", "holds the worker", tamper=cells_after_answer("import time\ntime.sleep(0.9)", 250),
           twin="reference", expect="at_most", status="timeout"),
    Attack("cells_under_the_cell_timeout", "holds the worker", tamper=cells_after_answer("import time\ntime.sleep(9)", 12),
           twin="reference", expect="at_most", status="timeout"),
    Attack("too_many_cells", "holds the worker", tamper=cells_after_answer("pass", MAX_ADDED_CELLS + 1),
           twin="reference", expect="at_most", status="invalid"),
    # -- processes: none started, whoever starts the grader (root in CI) ----------------------
    Attack("fork_bomb_2000", "starts processes", code("""
        import os, time
        for _ in range(2000):
            try:
                if os.fork() == 0:
                    time.sleep(120)
                    os._exit(0)
            except OSError:
                pass"""), twin="reference"),
    Attack("process_bomb_subprocess", "starts processes", code("""
        import subprocess
        for _ in range(2000):
            try:
                subprocess.Popen(["sleep", "120"])
            except OSError:
                pass"""), twin="reference"),
]


class ProcessCount(threading.Thread):
    """The largest number of processes below this one (the CLI, its workers and sandboxes)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.most, self.done = 0, threading.Event()

    def run(self):
        me = psutil.Process()
        while not self.done.wait(0.2):
            try:
                self.most = max(self.most, len(me.children(recursive=True)))
            except psutil.Error:
                pass


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    counter = ProcessCount()
    counter.start()
    try:
        graded = HostileClass(tmp_path_factory.mktemp("hostile-kernel"), ATTACKS,
                              ("--jobs", "1", "--cell-timeout", "10", "--notebook-timeout", str(NOTEBOOK_TIMEOUT)))
    finally:
        counter.done.set()
        counter.join()
    graded.most_processes = counter.most
    return graded


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_attack_earns_no_more_than_its_honest_twin(hostile, attack):
    hostile.check(attack)


def test_everyone_else_is_graded_as_usual(hostile):
    full = float(hostile.row("twin-reference")["max_score"])
    assert (hostile.row("twin-reference")["status"], hostile.score("twin-reference")) == ("ok", full)
    assert hostile.row("twin-wrong")["status"] == "ok" and 0 < hostile.score("twin-wrong") < full


def test_process_bombs_are_bounded(hostile):
    # Each bomb tries 2,000 processes, and the seccomp filter refuses the first: only the grader's
    # own processes run (the CLI, the worker, bwrap, the fork server and one kernel). The sandbox's
    # process limit, the layer below, is tried in test_sandbox.py without the filter.
    assert hostile.most_processes < 20


@pytest.mark.parametrize("student", ["many_cells_under_a_second", "cells_under_the_cell_timeout"])
def test_the_notebook_deadline_stops_the_notebook(hostile, student):
    """The cells after the deadline do not run: the tests after the added cells get nothing."""
    assert "the notebook ran past its time limit" in hostile.row(student)["reason"]
    tests = hostile.results.notebooks[(student, ASSIGNMENT)]["tests"]
    before = [t for t in tests if "project_qkv" in t["grade_id"]]  # the tests above the added cells
    assert before and all(t["passed"] for t in before)
    assert all(t["points"] == 0 for t in tests if t not in before)


def test_too_many_added_cells_are_refused(hostile):
    row = hostile.row("too_many_cells")
    assert (row["status"], float(row["score"])) == ("invalid", 0.0)
    assert f"at most {MAX_ADDED_CELLS} added cells" in row["reason"]


@pytest.mark.parametrize("student", ["twin-reference", "leak_history_after_the_tests", "leak_hook_before_the_tests"])
def test_no_hidden_test_code_reaches_the_student(hostile, student):
    """Neither the feedback page nor the results show a line of a hidden test (the student's
    own code, the reference solution here, may show)."""
    hidden = secret_lines(ASSIGNMENT) - {line.strip() for source in REFERENCE.values() for line in source.splitlines()}
    assert hidden
    page = (hostile.out / "feedback" / student / ASSIGNMENT / "qkv.html").read_text()
    result = hostile.results.notebooks[(student, ASSIGNMENT)]
    shown = "\n".join([html.unescape(re.sub(r"<[^>]+>", "", page)), result["reason"],
                       *(test["message"] for test in result["tests"])])
    assert [line for line in hidden if line in shown] == []
