"""Hostile notebooks of the third round (issue 24), graded by the real CLI: each attack beside
its honest twin, as in test_hostile.py; an attack never earns more than its twin.

One graded class per kind of hole (a fixture each, so ``-k`` grades only what it tests):
forged statuses, hidden tests echoed back, PyTorch's private implementations, students who
outlive their kernel, resources shared by everyone, and device bugs a CPU grader must see.
"""
from __future__ import annotations

import base64
import html
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from classroom import Results, grade, make_submission, secret_lines
from test_hostile import ASSIGNMENT, REFERENCE, RIGHT, SDPA, Attack, HostileClass, code

pytestmark = pytest.mark.slow  # runs kernels, the CLI, a server or a browser

OPTIONS = ("--cell-timeout", "60", "--notebook-timeout", "300")  # generous: a loaded machine must not time out honest work


def added_cell(source: str):
    """A cell of the student's own, right after the scaled_dot_product_attention cell."""
    def tamper(nb):
        (cell,) = [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == SDPA]
        nb["cells"].insert(nb["cells"].index(cell) + 1, nbformat.v4.new_code_cell(code(source)))
        return nb
    return tamper


def graded(tmp_path_factory, name: str, attacks: list[Attack], options=OPTIONS) -> HostileClass:
    return HostileClass(tmp_path_factory.mktemp(name), attacks, options)


def check_attacks(hostile: HostileClass, attack: Attack) -> None:
    hostile.check(attack)


def shown_to_student(hostile: HostileClass, student: str) -> str:
    """Everything of a notebook that reaches the student: the feedback page's text, the reason
    and every test's message."""
    page = (hostile.out / "feedback" / student / ASSIGNMENT / "qkv.html").read_text()
    result = hostile.results.notebooks[(student, ASSIGNMENT)]
    return "\n".join([html.unescape(re.sub(r"<[^>]+>", "", page)), result["reason"],
                      *(test["message"] for test in result["tests"])])


# --------------------------------------------------------------------------------------------
# 3. forged statuses: the status is what the grader observed, never a name the kernel printed

STATUS_ATTACKS = [
    # a wrong answer whose every call "times out", by an exception named like the executor's own
    Attack("forged_timeout_by_name", "forges a status", code("""
        class CellTimeoutError(BaseException):
            pass
        def scaled_dot_product_attention(*args, **kwargs):
            raise CellTimeoutError("the cell did not finish in time")"""), expect="at_most"),
    # a right answer that claims its kernel died, with a reason of its own choosing
    Attack("forged_dead_kernel_reason", "forges a status", twin="reference", tamper=added_cell("""
        DeadKernelError = type("DeadKernelError", (Exception,), {})
        raise DeadKernelError("REGRADE-ME-BY-HAND: the grader lost my work")""")),
    # ... and in a test cell's own output, by a class the student's function raises there
    Attack("forged_notebook_timeout_in_test", "forges a status", code("""
        class CellTimeoutError(KeyboardInterrupt):
            pass
        _honest = scaled_dot_product_attention
        def scaled_dot_product_attention(*args, **kwargs):
            raise CellTimeoutError("the notebook ran past its time limit (--notebook-timeout): FORGED")"""),
        expect="at_most"),
]


@pytest.fixture(scope="module")
def statuses(tmp_path_factory):
    return graded(tmp_path_factory, "statuses", STATUS_ATTACKS)


@pytest.mark.parametrize("attack", STATUS_ATTACKS, ids=lambda a: a.name)
def test_forged_status_is_the_students_error(statuses, attack):
    check_attacks(statuses, attack)
    row = statuses.row(attack.name)
    assert "REGRADE-ME" not in row["reason"] and "FORGED" not in row["reason"]
    assert "time limit" not in row["reason"] and "kernel died" not in row["reason"]


# --------------------------------------------------------------------------------------------
# issue 28, item 6: kernels never race for TCP ports, with or without the sandbox

# before the first hidden test: its output is shown
SHOW_TRANSPORT = 'import json, ipykernel\nprint("TRANSPORT", json.load(open(ipykernel.get_connection_file()))["transport"])'


@pytest.mark.parametrize("sandbox", [(), ("--no-sandbox",)], ids=["sandbox", "no-sandbox"])
def test_kernels_at_high_jobs_use_no_ports(tmp_path, sandbox):
    """Kernels started together pick their TCP ports free, then bind them: two could pick the same
    (an H100 run at --jobs 14 lost a notebook so). Each kernel talks over sockets in a folder of its
    own instead: every kernel says its transport is ipc, and no notebook ends in error."""
    students = [f"student{i}" for i in range(6)]
    for student in students:
        make_submission(tmp_path / "class", student, ASSIGNMENT, added=[("project_qkv", "new", SHOW_TRANSPORT)])
    process = grade(tmp_path / "class", tmp_path / "results", "--jobs", "6", *sandbox)
    assert process.returncode == 0, process.stderr[-3000:]
    results = Results.read(tmp_path / "results")
    rows = [results.grades[(student, ASSIGNMENT)] for student in students]
    assert [row["status"] for row in rows] == ["ok"] * len(students), rows
    for student in students:
        page = (tmp_path / "results" / "feedback" / student / ASSIGNMENT / "qkv.html").read_text()
        assert "TRANSPORT ipc" in page
        # every check ran and recorded (the probe itself, reading the kernel's connection file, is
        # outside what a notebook may use: attention_checks.allowlist)
        tests = results.notebooks[(student, ASSIGNMENT)]["tests"]
        assert tests and all("may not use" in t["message"] for t in tests if not t["manual"]), tests


# --------------------------------------------------------------------------------------------
# 4. students who outlive their kernel: what a kernel leaves, however protected, is gone for the
# next one graded in the same sandbox (one worker: one sandbox, students one after another)

LEAVE = code(f"""
    import os, zlib
    ANSWER = zlib.compress({REFERENCE[SDPA]!r}.encode())
    PLACES = ["/tmp", "/dev/shm", os.path.dirname(os.path.dirname(os.getcwd())), os.getcwd()]""")
# the writer (a right answer) hides the answer in folders its owner cannot simply remove ...
WRITE_PROTECTED = LEAVE + code("""
    for place in PLACES:
        try:
            os.makedirs(f"{place}/keep/deeper", exist_ok=True)
            open(f"{place}/keep/deeper/answer", "wb").write(ANSWER)
            os.makedirs(f"{place}/closed", exist_ok=True)
            open(f"{place}/closed/answer", "wb").write(ANSWER)
            os.chmod(f"{place}/keep/deeper", 0o500)
            os.chmod(f"{place}/keep", 0o500)
            os.chmod(f"{place}/closed", 0)
            os.chmod(place, 0o500)  # and the folder itself, so that nothing in it can go
        except OSError:
            pass""")
# ... and the reader (a wrong answer) runs what it finds
READ_PROTECTED = LEAVE + code("""
    for place in PLACES:
        for path in (f"{place}/keep/deeper/answer", f"{place}/closed/answer"):
            try:
                exec(zlib.decompress(open(path, "rb").read()))
            except OSError:
                pass""")

OUTLIVE_ATTACKS = [
    Attack("outlive_1_writer", "leaves files for the next student", WRITE_PROTECTED, twin="reference"),
    Attack("outlive_2_reader", "reads what the last student left", READ_PROTECTED),
    Attack("outlive_3_writer_again", "leaves files for the next student", WRITE_PROTECTED, twin="reference"),
    Attack("outlive_4_reader_again", "reads what the last student left", READ_PROTECTED),
]


@pytest.fixture(scope="module")
def outlive(tmp_path_factory):
    return graded(tmp_path_factory, "outlive", OUTLIVE_ATTACKS, ("--jobs", "1", *OPTIONS))


@pytest.mark.parametrize("attack", OUTLIVE_ATTACKS, ids=lambda a: a.name)
def test_nothing_outlives_a_kernel(outlive, attack):
    check_attacks(outlive, attack)


CLOSE_AND_CLEAN = """
import os, shutil, sys
from forkserver import empty, remove  # the script the sandbox runs, on its own
top = sys.argv[1]
def leave():
    os.makedirs(f"{top}/keep/deeper"); open(f"{top}/keep/deeper/answer", "w").write("x")
    os.makedirs(f"{top}/closed"); open(f"{top}/closed/answer", "w").write("x")
    os.chmod(f"{top}/keep/deeper", 0o500); os.chmod(f"{top}/keep", 0o500); os.chmod(f"{top}/closed", 0)
    os.chmod(top, 0o500)
leave()
shutil.rmtree(f"{top}/keep", ignore_errors=True); shutil.rmtree(f"{top}/closed", ignore_errors=True)
os.chmod(top, 0o700)
print("plain rmtree left", sorted(os.listdir(top)))
os.chmod(top, 0o500)
print("emptied", empty(top, 0o1777), oct(os.stat(top).st_mode & 0o7777), os.listdir(top))
leave()
remove(top)
print("removed", not os.path.exists(top))
"""


def python_for_anyone() -> str | None:
    """A Python that a user without privileges can run: this one's interpreter, unless it lies where
    only its owner may go (a pyenv in root's home, mode 0700), else the system's; None if neither."""
    for candidate in (Path(os.path.realpath(sys.executable)), Path("/usr/bin/python3")):
        if candidate.is_file() and all(os.stat(p).st_mode & stat.S_IXOTH for p in (candidate, *candidate.parents)):
            return str(candidate)
    return None


def test_clean_up_removes_what_its_owner_closed():
    """A kernel's folders closed to their owner (read-only, or mode 0) are removed by the same user
    without privileges: the fork server's reset and a stopping worker's clean-up."""
    from autograder.sandbox.bwrap import FORKSERVER

    top = Path(tempfile.mkdtemp(prefix="closed-scratch-"))  # where sandboxes' scratch folders are
    python, as_user = sys.executable, []
    if os.geteuid() == 0:  # root ignores modes: run as an unprivileged user, as the sandbox does
        os.chown(top, 65534, 65534)
        as_user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        python = python_for_anyone()
        if python is None:
            pytest.skip(f"no Python here that an unprivileged user can run (this one is {sys.executable})")
    # forkserver.py runs on its own in the sandbox (the standard library only), as here: a copy in a
    # folder anyone can read, so that the unprivileged user needs neither the checkout nor the
    # virtual environment (either may be in root's own home, mode 0700).
    server = Path(tempfile.mkdtemp(prefix="forkserver-"))
    server.chmod(0o755)
    shutil.copy(FORKSERVER, server / "forkserver.py")
    try:
        done = subprocess.run([*as_user, python, "-c", CLOSE_AND_CLEAN, str(top)],
                              capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(server)})
    finally:
        shutil.rmtree(server)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["plain rmtree left ['closed', 'keep']", "emptied True 0o1777 []", "removed True"]


@pytest.mark.parametrize("left", ["nothing", "a link elsewhere", "a closed folder"])
def test_the_scratch_folders_link_is_made_again_whatever_a_kernel_left(tmp_path, left):
    """The scratch folder's path on the host is, in the sandbox, a link to where the sandbox mounts
    it; where it lies in the sandbox's /tmp and the kernel may remove it (a grader that is not
    root), a reset makes it again: the next kernel's sockets must reach the grader."""
    from autograder.sandbox.forkserver import relink

    mounted, elsewhere, link = tmp_path / "mounted", tmp_path / "elsewhere", tmp_path / "tmp" / "autograder-sandbox-x"
    for folder in (mounted, elsewhere, link.parent):
        folder.mkdir()
    if left == "a link elsewhere":
        link.symlink_to(elsewhere)
    elif left == "a closed folder":
        (link / "deeper").mkdir(parents=True)
        (link / "deeper" / "note").write_text("x")
        (link / "deeper").chmod(0)
        link.chmod(0o500)
    relink(str(mounted), str(link))
    assert link.is_symlink() and os.readlink(link) == str(mounted)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "mounted", "tmp"]


# --------------------------------------------------------------------------------------------
# 2. hidden tests echoed back: a hook installed before the tests keeps every cell the kernel
# compiles; the student's function then says it, wherever the grader might quote the kernel

WORDS = "ant bee cat dog eel fox gnu hen ibis jay kite lark mole newt owl pig".split()

KEEP_COMPILED = code("""
    import base64, sys
    _compiled = []
    def _keep(event, args):  # IPython compiles each cell's source as bytes
        if event != "compile" or not args:
            return
        source = args[0].decode(errors="replace") if isinstance(args[0], bytes) else args[0]
        if isinstance(source, str) and "check_" in source:
            _compiled.append(source)
    sys.addaudithook(_keep)
    def _everything():
        return "\\n".join(_compiled[-4:])
    _honest = scaled_dot_product_attention""")

ECHO_ATTACKS = [
    # in the message of an exception raised on every call
    Attack("echo_in_exception", "echoes hidden tests", KEEP_COMPILED + code("""
        def scaled_dot_product_attention(*args, **kwargs):
            raise ValueError("shapes do not fit:\\n" + _everything())"""), expect="at_most"),
    # encoded, as the name of the type it returns, and as the line an error was "raised at"
    Attack("echo_encoded", "echoes hidden tests", KEEP_COMPILED + code("""
        def scaled_dot_product_attention(query, *args, **kwargs):
            secret = base64.b64encode(_everything().encode()).decode()
            if query.device.type == "meta":  # the grader reads the meta run's error for a device bug
                raise RuntimeError("Expected all tensors to be on the same device, cpu and meta\\n at: " + _everything())
            if query.dim() == 4:
                return type("T_" + "_".join(_everything().split()[:40]).replace("=", "_"), (), {})(), None
            raise TypeError(secret)"""), expect="at_most"),
    # in an encoding of its own: two words per character, in a message
    Attack("echo_in_own_words", "echoes hidden tests", KEEP_COMPILED + code(f"""
        WORDS = {WORDS!r}
        def scaled_dot_product_attention(*args, **kwargs):
            said = [ord(c) % 256 for c in _everything()]
            raise ValueError(" ".join(WORDS[c // 16] + " " + WORDS[c % 16] for c in said))"""), expect="at_most"),
    # eight characters a call, from the hidden test's first name on, as the sizes of an empty
    # tensor (made on the inputs' device, as the meta run wants): the report would quote its shape
    Attack("echo_in_shapes", "echoes hidden tests", KEEP_COMPILED + code("""
        _calls = []
        def scaled_dot_product_attention(query, *args, **kwargs):
            text = _everything()
            start = text.find("hidden_") + 8 * len(_calls)
            _calls.append(1) if "hidden_" in text else None
            return torch.zeros(0, *[ord(c) % 256 for c in text[start:start + 8]], device=query.device), None"""),
        expect="at_most"),
    # in PyTorch's own words, which a sealed report quotes: two characters a call as the sizes of a
    # message PyTorch raises (torch.cat of tensors of those widths), or of one forged in its form
    Attack("echo_in_pytorch_words", "echoes hidden tests", KEEP_COMPILED + code("""
        _said = []
        def scaled_dot_product_attention(query, *args, **kwargs):
            text = _everything()
            start = max(text.find("hidden_"), 0) + 2 * len(_said)
            _said.append(1)
            a, b = (ord(c) % 256 for c in (text[start:start + 2] + "  ")[:2])
            if len(_said) % 2:
                torch.cat([query.new_zeros(1, a), query.new_zeros(1, b)], dim=0)
            raise RuntimeError(f"Sizes of tensors must match except in dimension 1. Expected size {a} but got "
                               f"size {b} for tensor number 1 in the list.")"""), expect="at_most"),
]


def readings(shown: str) -> list[str]:
    """What a student could read out of ``shown``: the text, its base64 runs decoded, and what
    echo_in_own_words, echo_in_shapes and echo_in_pytorch_words encode, decoded."""
    found = [shown]
    for blob in re.findall(r"[A-Za-z0-9+/=]{24,}", shown):
        found.append(base64.b64decode(blob + "===", validate=False).decode("utf-8", "replace"))
    number = {word: i for i, word in enumerate(WORDS)}
    for run in re.findall(rf"(?:\b(?:{'|'.join(WORDS)})\b ?)+", shown):
        digits = [number[word] for word in run.split()]
        for start in (0, 1):  # either word may come first
            pairs = zip(digits[start::2], digits[start + 1::2])
            found.append("".join(chr(16 * high + low) for high, low in pairs))
    found.append("".join(chr(int(n)) for sizes in re.findall(r"\(0, ([\d, ]+)\)", shown) for n in sizes.split(", ")))
    found.append("".join(chr(int(a)) + chr(int(b)) for a, b in re.findall(r"Expected size (\d+) but got size (\d+)", shown)))
    return found


@pytest.fixture(scope="module")
def echoes(tmp_path_factory):
    return graded(tmp_path_factory, "echoes", ECHO_ATTACKS)


@pytest.mark.parametrize("attack", ECHO_ATTACKS, ids=lambda a: a.name)
def test_hidden_tests_are_never_echoed(echoes, attack):
    check_attacks(echoes, attack)
    hidden = secret_lines(ASSIGNMENT) - {line.strip() for source in REFERENCE.values() for line in source.splitlines()}
    found = readings(shown_to_student(echoes, attack.name))
    for reading in found:  # nothing hidden, decoded or not
        assert [line for line in hidden if line in reading] == []
        assert not re.search(r"hidden_\w+_cases", reading)  # the names of the hidden tests' own variables
    if attack.name not in ("echo_in_shapes", "echo_in_pytorch_words"):  # (a few characters a call)
        # the attack works: before the first hidden test, what it kept of the visible tests is readable
        assert any("check_scaled_dot_product_attention(" in reading for reading in found)


# --------------------------------------------------------------------------------------------
# 1. PyTorch's private implementations: the decomposition behind F.scaled_dot_product_attention,
# found by a name built at run time (the scan cannot read it) or written out (the kernel may lie)

PRIVATE_ATTACKS = [
    Attack("private_by_hidden_name", "calls PyTorch's private implementation", code("""
        import importlib
        _where = importlib.import_module("torch." + "".join(reversed("snoitisopmoced.pmoced_")))
        _found = vars(_where)["scaled_dot_product_" + "flash_attention_for_cpu"]
        def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
            output = _found(query, key, value, 0.0, is_causal, attn_mask=attn_mask, scale=scale)[0]
            weights = (output @ value.transpose(-2, -1)).softmax(-1)  # not the point of the attack
            return output, weights"""), expect="at_most"),
    Attack("private_by_plain_name", "calls PyTorch's private implementation", code("""
        import torch._decomp.decompositions as _plain
        def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
            output = _plain.scaled_dot_product_flash_attention_for_cpu(
                query, key, value, 0.0, is_causal, attn_mask=attn_mask, scale=scale)[0]
            return output, (output @ value.transpose(-2, -1)).softmax(-1)"""), expect="at_most"),
    # registered as the kernel of an operator of the notebook's own, which PyTorch's dispatcher
    # runs when its Python (torch.ops' __call__) calls it; every name built at run time
    Attack("private_as_kernel_of_own_operator", "calls PyTorch's private implementation", code("""
        import importlib, torch
        _honest = scaled_dot_product_attention  # for the weights: the output is the point
        _where = importlib.import_module("torch." + "".join(reversed("snoitisopmoced.pmoced_")))
        _registry = getattr(torch, "".join(reversed("yrarbil"))).Library("coursework", "DEF")
        _registry.define("attend(Tensor q, Tensor k, Tensor v, float p, bool causal, *, Tensor? attn_mask=None, "
                         "float? scale=None) -> (Tensor, Tensor)")
        _registry.impl("attend", vars(_where)["scaled_dot_product_" + "flash_attention_for_cpu"],
                       "CompositeImplicitAutograd")
        def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
            *lead, L, S = *query.shape[:-1], key.size(-2)
            q, k, v = (t.reshape(-1, 1, *t.shape[-2:]) for t in (query, key, value))  # the kernel wants heads
            mask = None if attn_mask is None else attn_mask.expand(*lead, L, S).reshape(-1, 1, L, S)
            output = getattr(torch.ops, "course" + "work").attend(q, k, v, 0.0, is_causal, attn_mask=mask, scale=scale)[0]
            return output.reshape(*lead, L, -1), _honest(query, key, value, attn_mask, is_causal, scale)[1]"""),
           expect="at_most"),
    # a public operator no check forbids (sigmoid) made a softmax, then reached through
    # F.sigmoid (Python): the student's own code is a right answer but for that one word
    Attack("private_as_kernel_of_public_operator", "calls PyTorch's private implementation", code("""
        import functools, importlib, torch
        import torch.nn.functional as F
        _kept = torch.library.Library("aten", "IMPL")
        _kept.impl("sigmoid", functools.partial(importlib.import_module("torch._" + "refs").softmax, dim=-1), "CPU")
        """) + RIGHT.replace("weights = scores.softmax(-1)", "weights = F.sigmoid(scores)") + code("""
        scaled_dot_product_attention = _right"""), expect="at_most"),
]


@pytest.fixture(scope="module")
def private(tmp_path_factory):
    return graded(tmp_path_factory, "private", PRIVATE_ATTACKS)


@pytest.mark.parametrize("attack", PRIVATE_ATTACKS, ids=lambda a: a.name)
def test_private_implementations_earn_nothing(private, attack):
    check_attacks(private, attack)
    messages = [t["message"] for t in private.results.notebooks[(attack.name, ASSIGNMENT)]["tests"]
                if "scaled_dot_product_attention" in t["message"].splitlines()[0]]
    # seen in the kernel, whatever the scan of the source adds (the registration, read in plain words)
    assert messages and all("PyTorch's private implementations" in m for m in messages), messages
    registers = "operator kernels that the notebook registers with PyTorch" in messages[0]
    assert registers == (attack.name == "private_as_kernel_of_public_operator"), messages


# --------------------------------------------------------------------------------------------
# 5. resources shared by everyone: RAM disks, the scratch folder, memory and output have a size per notebook

# files of `mib` MiB in `folder`, until a write fails: the MiB written
FILL = """
def fill(folder, tag, files=16, mib=64):
    written = 0
    for n in range(files):
        try:
            with open(f"{folder}/{tag}{n}", "wb") as f:
                for _ in range(mib):
                    f.write(b"x" * 2**20)
                    written += 1
        except OSError:
            break
    return written
"""
# 16 files of 64 MiB (the largest file a kernel may write) in each: 1 GiB each
FILL_RAM_DISKS = FILL + 'print("WROTE", max(fill(place, "fill") for place in ("/tmp", "/dev/shm")), "MiB")'
PRINT_A_LOT = 'print("y" * (900 * 1024))'
# four children of 1.25 GiB each: under the 4 GiB limit per process, 5 GiB together
MEMORY_IN_CHILDREN = """
import mmap, os, time
children = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        held = mmap.mmap(-1, 1280 * 2**20)
        for offset in range(0, len(held), 4096):
            held[offset] = 1
        time.sleep(3)
        os._exit(0)
    children.append(pid)
print("CHILDREN", sorted(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children))
"""
FILL_SCRATCH = FILL + 'print("SCRATCH", fill(".", "fill", 32, 32), "MiB")'  # 1 GiB where the kernel works

# the host's own disk: the folder of the kernel's sockets, found by its connection file, and the
# scratch folder's mount in the sandbox, found in the mount table; from the cell, and from a thread
# ipykernel started before the student's code ran
FILL_HOST_FOLDERS = FILL + """
import os, sys
from ipykernel.connect import get_connection_file
places = [os.path.dirname(get_connection_file())]
places += [line.split()[4] for line in open("/proc/self/mountinfo") if " rw," in line and line.split()[4].startswith("/run")]
written = []
for place in places:
    written.append(fill(place, "cell"))
    sys.stdout.pub_thread.schedule(lambda place=place: written.append(fill(place, "thread")))
sys.stdout.flush()
print("HOST", sum(written), "MiB in", len(places), "places")
"""
# a RAM disk of no size, in a user and mount namespace of the kernel's own (unshare -Urm)
UNSIZED_RAM_DISK = """
import subprocess
made = subprocess.run(["unshare", "-Urm", "sh", "-c", "mount -t tmpfs big /mnt && "
                       "for n in 1 2 3 4 5 6 7 8; do head -c 67108864 /dev/zero > /mnt/fill$n || break; done; "
                       "du -sm /mnt"], capture_output=True, text=True)
print("NAMESPACE", (made.stdout.split() or ["0"])[0], "MiB", made.returncode)
"""

RESOURCE_ATTACKS = [
    Attack("fill_ram_disks", "fills the machine's memory through /tmp", twin="reference",
           tamper=lambda nb: _after("project_qkv", nb, [FILL_RAM_DISKS])),
    Attack("output_in_many_cells", "fills the results with output", twin="reference",
           tamper=lambda nb: _after("project_qkv", nb, [PRINT_A_LOT] * 40)),
    Attack("memory_in_children", "holds more than its memory in several processes", twin="reference",
           tamper=lambda nb: _after("project_qkv", nb, [MEMORY_IN_CHILDREN])),
    Attack("fill_scratch", "fills the host's disk where the kernel works", twin="reference",
           tamper=lambda nb: _after("project_qkv", nb, [FILL_SCRATCH])),
    Attack("fill_host_folders", "fills the host's disk through the kernel's sockets folder", twin="reference",
           tamper=lambda nb: _after("project_qkv", nb, [FILL_HOST_FOLDERS])),
    Attack("unsized_ram_disk", "fills the machine's memory through a RAM disk of its own", twin="reference",
           tamper=lambda nb: _after("project_qkv", nb, [UNSIZED_RAM_DISK])),
]


def _after(grade_id: str, nb: dict, sources: list[str]) -> dict:
    (cell,) = [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id]
    at = nb["cells"].index(cell) + 1
    nb["cells"][at:at] = [nbformat.v4.new_code_cell(source) for source in sources]
    return nb


@pytest.fixture(scope="module")
def resources(tmp_path_factory):
    return graded(tmp_path_factory, "resources", RESOURCE_ATTACKS)


@pytest.mark.parametrize("attack", RESOURCE_ATTACKS, ids=lambda a: a.name)
def test_shared_resources_are_limited_per_notebook(resources, attack):
    check_attacks(resources, attack)


def test_ram_disks_have_a_size(resources):
    from autograder.sandbox.bwrap import TMPFS_BYTES

    wrote = re.search(r"WROTE (\d+) MiB", shown_to_student(resources, "fill_ram_disks"))
    assert wrote and 0 < int(wrote[1]) <= TMPFS_BYTES // 2**20


def test_output_has_a_budget_per_notebook(resources):
    row = resources.row("output_in_many_cells")
    assert row["status"] == "ok" and "output cut" in row["reason"]
    page = resources.out / "feedback" / "output_in_many_cells" / ASSIGNMENT / "qkv.html"
    assert page.stat().st_size < 20 * 1024**2  # 40 cells of 0.9 MiB, 36 MiB without the budget
    assert (resources.out / "results.json").stat().st_size < 5 * 1024**2


def test_a_notebook_holds_memory_in_one_process_only(resources):
    """A kernel's cells can start no process (issue 49: forkserver.forbid_new_threads_and_processes);
    the memory group that bounds a sandbox's processes together is tested below that layer
    (tests/test_sandbox.py::test_memory_is_limited_for_all_of_a_kernels_processes_together)."""
    shown = shown_to_student(resources, "memory_in_children")
    assert "PermissionError: [Errno 1] Operation not permitted" in shown and "CHILDREN [" not in shown
    assert resources.row("memory_in_children")["status"] == "ok"


def test_the_kernels_folder_has_a_size(resources):
    from autograder.sandbox.bwrap import TMPFS_BYTES

    wrote = re.search(r"SCRATCH (\d+) MiB", shown_to_student(resources, "fill_scratch"))
    assert wrote and 0 < int(wrote[1]) <= TMPFS_BYTES // 2**20  # in the sandbox's /tmp, a RAM disk


def test_a_kernel_writes_nothing_on_the_hosts_disk_nor_in_a_ram_disk_of_its_own(resources):
    from autograder.sandbox.forkserver import landlock_version

    if not landlock_version():
        pytest.skip("this Linux has no Landlock: a kernel may write to its scratch folder (README)")
    host = re.search(r"HOST (\d+) MiB in (\d+) places", shown_to_student(resources, "fill_host_folders"))
    assert host and host[1] == "0" and host[2] == "2", host  # the sockets folder and the scratch mount found
    # unshare is a process the kernel cannot start any more (issue 49); Landlock's refusal to mount
    # is tested below that layer (tests/test_sandbox.py::test_a_started_kernel_writes_only_to_its_ram_disks)
    shown = shown_to_student(resources, "unsized_ram_disk")
    assert "NAMESPACE" not in shown.replace('print("NAMESPACE"', "") and "PermissionError" in shown
