"""The warm sandbox: kernels forked one after another from one fork server must start
warm, and nothing one kernel leaves behind (processes, files, shared memory, patches,
a stopped or killed server) may reach the next one."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import nbformat
import pytest
from traitlets.config import Config

from autograder.results import observed_status
from autograder.sandbox import kernels
from autograder.sandbox import server as sandbox_server
from autograder.sandbox.bwrap import TMPFS_BYTES, bwrap_available, sandbox_limits
from autograder.sandbox.cgroups import MemoryGroup, memory_groups_available
from autograder.sandbox.kernels import ReadOnlyOutputWidget, SandboxedExecute, SandboxedKernelManager
from autograder.sandbox.server import ForkServer, fork_server

pytestmark = [pytest.mark.slow,  # runs kernels, the CLI, a server or a browser
              pytest.mark.skipif(not bwrap_available(), reason="needs bubblewrap")]

LIMITS = sandbox_limits(4 * 1024**3)


def run_kernel(work_root, code: str, answer_timeout: float | None = None, **settings) -> tuple[str, bool]:
    """Run ``code`` in a kernel of the sandbox at ``work_root`` (the kernel manager's ``settings``:
    other limits, another fork server): its stdout, and whether the kernel was still alive at the end."""
    async def main():
        km = SandboxedKernelManager(work_root=str(work_root), kernel_name="python3", **settings)
        notebook_dir = work_root / "notebook"
        notebook_dir.mkdir(exist_ok=True)
        await km.start_kernel(cwd=str(notebook_dir), extra_arguments=["--HistoryManager.hist_file=:memory:"])
        if answer_timeout:
            km.provisioner.server.answer_timeout = answer_timeout
        kc = km.client()
        kc.start_channels()
        await kc.wait_for_ready(timeout=60)
        msg_id, out = kc.execute(textwrap.dedent(code)), []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                msg = await kc.get_iopub_msg(timeout=1)
            except Exception:  # noqa: BLE001 - nothing for a second: a kernel that went away sends nothing more
                if not await km.is_alive():
                    break
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            if msg["msg_type"] == "error":
                out.append(f"{msg['content']['ename']}: {msg['content']['evalue']}")
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        alive = await km.is_alive()
        kc.stop_channels()
        await km.shutdown_kernel(now=True)
        return "".join(out), alive
    return asyncio.run(main())


def test_kernels_start_with_torch_imported_and_patches_stay_in_their_kernel(tmp_path):
    out, _ = run_kernel(tmp_path, """
        import sys
        print("torch" in sys.modules)
        import torch
        torch.matmul = None""")
    assert out.strip() == "True"
    out, _ = run_kernel(tmp_path, "import torch; print(torch.matmul is None)")
    assert out.strip() == "False"


def test_the_sandbox_reads_the_graders_font_list_instead_of_making_one(tmp_path, monkeypatch):
    """matplotlib lists the machine's fonts at its first import where its cache is empty, as a
    sandbox's /tmp is (0.3 s of every sandbox's start): the fork server reads the grader's list."""
    made = tmp_path / "made"
    subprocess.run([sys.executable, "-c", "import matplotlib.font_manager"], check=True,
                   env=dict(os.environ, MPLCONFIGDIR=str(made)))
    (font_list,) = made.glob("fontlist-v*.json")
    graders = tmp_path / "graders"
    graders.mkdir()
    (graders / font_list.name).write_text(json.dumps({**json.loads(font_list.read_text()), "read_in_the_sandbox": 1}))
    monkeypatch.setenv("MPLCONFIGDIR", str(graders))
    out, _ = run_kernel(tmp_path, "import matplotlib.font_manager as fm; print(getattr(fm.fontManager, "
                                  "'read_in_the_sandbox', 0))", memory_limit=LIMITS["memory_bytes"] - 4096)
    assert out.strip() == "1"  # another fork server than the other tests' (other limits), started now


LEAVE_TRACES = """
    import ctypes, os, time
    libc = ctypes.CDLL(None)
    print(libc.shmget(4242, 4096, 0o1666) >= 0)           # SysV shared memory outlives processes
    open("/tmp/left-behind", "w").write("x")
    open("left-behind", "w").write("x")                    # the kernel's own folder
    try:
        open("/dev/left-behind", "w").write("x")            # /dev is read-only
    except OSError:
        pass
    print(libc.mq_open(b"/left-behind", os.O_CREAT | os.O_RDWR, 0o666, None) >= 0)  # POSIX queues too
    for keyring in (-3, -4, -5):                            # session, user, user session keyrings
        print(libc.syscall(248, b"user", b"left-behind", b"x", 1, keyring) > 0)  # add_key(2)
    server = os.getppid()
    if os.fork() == 0:                                      # a daemon that outlives the kernel
        os.setsid()
        if os.fork() == 0:
            time.sleep(0.5)
            for _ in range(6000):                           # ... and kills the next kernel
                for name in os.listdir("/proc"):
                    if name.isdigit() and int(name) not in (1, os.getpid(), server):
                        try:
                            os.kill(int(name), 9)
                        except OSError:
                            pass
                time.sleep(0.01)
        os._exit(0)
"""

LOOK_AROUND = """
    import os, json, time
    time.sleep(1)  # time for a surviving daemon to strike
    others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid(), os.getppid())]
    print(json.dumps({"others": others, "files": [f for f in ("/tmp/left-behind", "left-behind",
                                                             "/dev/left-behind") if os.path.exists(f)],
                      "shm": open("/proc/sysvipc/shm").read().splitlines()[1:], "queues": os.listdir("/dev/mqueue"),
                      "keys": [key for key in open("/proc/keys") if "left-behind" in key]}))
"""


def test_kernels_that_leave_only_files_share_one_warm_server(tmp_path):
    """A reset that removed everything keeps the server: the next kernel is forked from the
    same warm Python, not from a new sandbox that imports torch again (seconds per notebook).
    The scratch folder's link in the sandbox's /tmp stays, and a reset must not count it as
    something left behind."""
    servers = set()
    for code in ('open("/tmp/note", "w").write("x")', 'open("note", "w").write("x")', "print(1)"):
        run_kernel(tmp_path, code)
        servers.add(fork_server(LIMITS).process.pid)
    assert len(servers) == 1


def test_nothing_of_one_kernel_is_left_for_the_next(tmp_path):
    from autograder.sandbox.forkserver import landlock_version

    out, _ = run_kernel(tmp_path, LEAVE_TRACES, one_thread=False)  # a kernel that could fork
    # every trace was left, but a POSIX message queue where Landlock holds (mq_open makes a file)
    assert out.split() == ["True", str(not landlock_version()), "True", "True", "True"]
    out, alive = run_kernel(tmp_path, LOOK_AROUND)
    assert alive, "the next kernel was killed"
    assert json.loads(out) == {"others": [], "files": [], "shm": [], "queues": [], "keys": []}


def test_a_kernel_has_no_capabilities_and_cannot_look_into_its_server(tmp_path):
    out, _ = run_kernel(tmp_path, """
        import os
        print(open("/proc/self/status").read().split("CapEff:")[1].split()[0])
        for what in ("mem", "environ"):
            try:
                open(f"/proc/{os.getppid()}/{what}", "rb").read(1)
                print(what, "readable")
            except PermissionError:
                print(what, "denied")""")
    assert out.split() == ["0000000000000000", "mem", "denied", "environ", "denied"]


def test_a_fork_bomb_is_bounded_even_when_root_grades(tmp_path):
    """RLIMIT_NPROC never limits root: a grader run as root runs its kernels as another user."""
    out, alive = run_kernel(tmp_path, """
        import os, time
        started = 0
        try:
            for _ in range(2000):
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
                started += 1
        except OSError:
            pass
        print(os.getuid(), started)""", one_thread=False)  # the limit below the seccomp filter
    uid, started = map(int, out.split())
    assert alive and 100 < started < LIMITS["processes"]
    assert uid != 0 or os.geteuid() != 0
    out, alive = run_kernel(tmp_path, "print(6 * 7)")  # the bomb's processes are gone with it
    assert (out.strip(), alive) == ("42", True)


@pytest.mark.parametrize("signal_name", ["SIGSTOP", "SIGKILL"])
def test_a_kernel_that_stops_or_kills_its_server_loses_only_itself(tmp_path, signal_name):
    _, alive = run_kernel(tmp_path, f"import os, signal, time; os.kill(os.getppid(), signal.{signal_name}); time.sleep(3)",
                          answer_timeout=2)
    assert not alive
    out, alive = run_kernel(tmp_path, "print(6 * 7)")
    assert (out.strip(), alive) == ("42", True)


def test_a_server_that_cannot_fork_safely_means_cold_kernels(tmp_path, monkeypatch):
    broken = tmp_path / "forkserver.py"
    broken.write_text('print(\'{"ready": false, "threads": 3}\', flush=True)\n')
    monkeypatch.setattr(sandbox_server, "FORKSERVER", broken)
    monkeypatch.setattr(sandbox_server, "_fork_servers", {})  # not the running one
    # cold: without the fork server's preloaded modules (torch itself comes with the one-thread rule)
    out, alive = run_kernel(tmp_path, "import sys; print('matplotlib.pyplot' in sys.modules, 6 * 7)")
    assert (out.strip(), alive) == ("False 42", True)


def test_a_fork_server_that_cannot_start_leaves_nothing_behind(monkeypatch, tmp_path):
    """No process to be had (fork fails): `grade`'s early launch raises nothing and leaves no
    scratch folder; the first kernel's try raises ForkServerError, which starts it cold (above)."""
    def no_process(*args, **kwargs):
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(sandbox_server, "_fork_servers", {})  # not the running one
    # a temp folder of its own: other tests' sandboxes come and go in the system's meanwhile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    scratch = Path(tempfile.gettempdir())
    before = set(scratch.glob("autograder-sandbox-*"))
    with monkeypatch.context() as patch:
        patch.setattr(subprocess, "Popen", no_process)
        sandbox_server.launch_fork_server(LIMITS)
        server = fork_server(LIMITS)
        assert server.process is None
        with pytest.raises(sandbox_server.ForkServerError, match="did not start"):
            server.prepare()
    assert set(scratch.glob("autograder-sandbox-*")) == before


def test_a_workers_new_run_stops_only_the_idle_servers_of_other_limits(monkeypatch):
    """A Dask worker keeps one warm sandbox, for its run's limits (`stop_fork_servers(keeping=)`):
    a server of other limits goes, unless a kernel (another run's) is using it; with no limits
    given (the worker stops), every one goes."""
    monkeypatch.setattr(sandbox_server, "_fork_servers", {})  # not the running ones
    stopped = []
    monkeypatch.setattr(ForkServer, "stop", lambda server: stopped.append(server.limits["memory_bytes"]))
    kept, idle, busy = (fork_server(sandbox_limits(mib * 1024**2)) for mib in (4096, 2048, 1024))
    busy.dirty = True  # a kernel was forked and is not yet reset
    sandbox_server.stop_fork_servers(keeping=kept.limits)
    assert stopped == [idle.limits["memory_bytes"]]
    stopped.clear()
    sandbox_server.stop_fork_servers()
    assert sorted(stopped) == sorted(server.limits["memory_bytes"] for server in (kept, idle, busy))


def test_a_stopped_server_takes_its_whole_sandbox_down(tmp_path):
    server = ForkServer(LIMITS)
    scratch = server.prepare()
    bwrap = server.process.pid
    assert server.ask("poll", pid=999_999) == {"exit": -9}  # it answers; unknown kernels count as gone
    server.stop()
    assert server.process is None and not scratch.exists()
    leftovers = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _parent(p) == bwrap]
    assert leftovers == []


def _parent(proc) -> int | None:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def test_output_widgets_never_write_to_the_kernel():
    """nbclient's Output widget sends on the shell socket while a reply is awaited there
    (jupyter/nbclient#312); the grader's must not."""
    class NoSending:
        def __getattr__(self, name):
            raise AssertionError(f"the widget used the kernel client ({name})")

    widget = ReadOnlyOutputWidget("comm", {"outputs": []}, NoSending(), executor=None)
    widget.clear_output([], {"parent_header": {}, "content": {"wait": False}}, 0)
    assert widget.outputs == []


def run_notebook(tmp_path, cells: list, memory_limit: int = LIMITS["memory_bytes"],
                 one_thread: bool = True) -> nbformat.NotebookNode:
    """Run ``cells`` (code cells: source, or (source, nbgrader metadata)) as the grader does (but
    with threads and processes where ``one_thread`` is False, to test the layers below that)."""
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    for cell in cells:
        source, nbgrader = (cell, None) if isinstance(cell, str) else cell
        nb.cells.append(nbformat.v4.new_code_cell(textwrap.dedent(source),
                                                  metadata={"nbgrader": nbgrader} if nbgrader else {}))
    executor = SandboxedExecute(kernel_manager_class=SandboxedKernelManager, timeout=60,
                                extra_arguments=["--HistoryManager.hist_file=:memory:"],
                                config=Config({"SandboxedKernelManager": {"memory_limit": memory_limit,
                                                                         "one_thread": one_thread}}))
    executor.preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    return nb


def graded_cell(source: str) -> tuple[str, dict]:
    return source, {"grade": True, "solution": False, "locked": True, "grade_id": "t", "points": 1}


def test_test_cells_leave_no_history(tmp_path):
    nb = run_notebook(tmp_path, [graded_cell("visible = 'the test code'"), """
        print(any("the test " + "code" in str(entry) for entry in [*In, *_ih, *Out.values(), *_oh.values()]
                  + [v for k, v in globals().items() if k.startswith("_i")]))"""])
    assert [o.text for o in nb.cells[1].outputs] == ["False\n"]


def test_nothing_the_kernel_sends_after_a_hidden_test_can_show_it(tmp_path):
    """A student's hook sees the hidden test compiled; what it prints, raises, updates or
    displays from then on never reaches the notebook."""
    nb = run_notebook(tmp_path, ["""
        import sys, threading, time, linecache
        from IPython.display import display, update_display
        seen = []
        sys.addaudithook(lambda event, args: seen.append(str(args[0])) if event == "compile" else None)
        display("before", display_id="early")
        def leak():
            while True:
                time.sleep(0.05)
                print(*[s for s in seen if "SECRET" in s], file=sys.stderr)
        try:  # refused in a grading kernel (one thread): the hook alone then
            threading.Thread(target=leak, daemon=True).start()
        except RuntimeError:
            pass""",
        graded_cell("# visible\n### BEGIN HIDDEN TESTS\nhidden = 'SECRET-" + "CASES'\nprint(hidden)\n### END HIDDEN TESTS"),
        """
        update_display([s for s in seen if "SECRET" in s], display_id="early")
        print(seen, [*In], linecache.cache)
        raise RuntimeError(str(seen))"""])
    shown = json.dumps([cell.outputs for cell in nb.cells]) + json.dumps(nb.metadata)  # all but the sources
    assert "SECRET-CASES" not in shown
    assert [o.text for o in nb.cells[2].outputs] == [kernels.AFTER_HIDDEN_TESTS]
    assert nb.cells[0].outputs[0].data["text/plain"] == "'before'"


needs_memory_group = pytest.mark.skipif(not (lambda g: g and g.remove() is None)(MemoryGroup.create(2**30)),
                                        reason="the grader may not make memory control groups here")

HOLD_MEMORY = """
import mmap, os, time
def hold(mib, flags=mmap.MAP_SHARED):  # touch every page: resident memory, not only address space
    held = mmap.mmap(-1, mib * 2**20, flags=flags)
    rewrite(held, 1)
    return held
def rewrite(held, value):  # each page written in place: no new memory
    for offset in range(0, len(held), 4096):
        held[offset] = value
"""


def test_the_memory_a_test_cell_uses_is_measured_from_outside_the_kernel(tmp_path):
    """The fork server measures what each test cell used (what flash_attention's long case is judged
    on): new memory at its peak (200 MiB held for a moment and freed), memory held before the cell
    and written in it (a buffer made beforehand), or written and then given back before the end;
    files on the sandbox's RAM disks are memory too (kept; written and removed within the cell
    where the sandbox has a memory group, whose peak counts every page). A cell that touches nothing
    it held is not charged for it, nor for the garbage of earlier cells (collected before it runs);
    the student's code cannot reset the measure (its own clear_refs is closed to it)."""
    from autograder.results import memory_used

    measured = "# a test of memory_mib\n"  # the case key that makes the sandbox measure a test cell
    # 60 MiB: a kernel's files stop at 64 MiB (FILE_BYTES)
    on_ram_disk = "with open({!r}, 'wb') as file:\n    for _ in range(60):\n        file.write(b'x' * 2**20)\n"
    nb = run_notebook(tmp_path, [HOLD_MEMORY, "before, buffer, own = hold(150), hold(120), hold(120, mmap.MAP_PRIVATE)",
                                 graded_cell(measured + "hold(200).close()"),
                                 graded_cell(measured + "print(6 * 7)"),
                                 graded_cell(measured + "rewrite(own, 2)"),
                                 graded_cell(measured + "rewrite(buffer, 2)\nbuffer.close()"),
                                 graded_cell("hold(200).close()"), """
        try:
            open("/proc/self/clear_refs", "w").write("5")
            print("RESET")
        except OSError as error:
            print(type(error).__name__)""",
        # a reference cycle holding 150 MiB, which the collector (off) leaves to the measured cell
        "import gc\ngc.disable()\ncycle = [hold(150)]\ncycle.append(cycle)\ndel cycle",
        graded_cell(measured + "gc.collect()"),
        graded_cell(measured + on_ram_disk.format("/dev/shm/kept")),
        graded_cell(measured + on_ram_disk.format("/tmp/removed") + "os.remove('/tmp/removed')"),
        # shared memory (a tensor's share_memory_(), say) made before and rewritten in place
        "shared = hold(120)", graded_cell(measured + "rewrite(shared, 2)")])
    new, idle, rewritten, given_back = (memory_used(cell) for cell in nb.cells[2:6])
    garbage, kept, removed = (memory_used(cell) for cell in nb.cells[9:12])
    shared = memory_used(nb.cells[13])
    assert 190 * 2**20 <= new < 230 * 2**20, new
    assert idle < 16 * 2**20, idle  # the 270 MiB held since before the cell are not its
    assert 115 * 2**20 <= rewritten < 150 * 2**20, rewritten
    assert 115 * 2**20 <= given_back < 150 * 2**20, given_back
    # only test cells of a memory bound are measured (it costs some 20 ms a cell)
    assert memory_used(nb.cells[1]) is None and memory_used(nb.cells[6]) is None
    assert nb.cells[7].outputs[0].text == "PermissionError\n"
    assert garbage < 40 * 2**20, garbage  # (a collection reads every object the kernel made: some 17 MiB)
    assert 58 * 2**20 <= kept < 90 * 2**20, kept
    if memory_groups_available():  # seen only at the group's peak: the file is gone at the end
        assert 58 * 2**20 <= removed < 90 * 2**20, removed
    assert 115 * 2**20 <= shared < 150 * 2**20, shared


MIB = 2**20


def test_touched_memory_is_anonymous_shared_or_on_a_ram_disk_never_a_librarys_pages():
    """What the fork server reads of a kernel's mappings (here this process's own): pages read or
    written since clear_refs, in private and shared anonymous memory, and not the pages of a file
    on disk it maps and reads (its libraries' code)."""
    import mmap

    from autograder.sandbox.forkserver import _touched

    library = Path(torch_library()).read_bytes()  # in the page cache: mapping it reads no disk
    smaps = os.open("/proc/self/smaps", os.O_RDONLY)
    try:
        private = mmap.mmap(-1, 64 * MIB, flags=mmap.MAP_PRIVATE)
        shared = mmap.mmap(-1, 32 * MIB)
        with open(torch_library(), "rb") as file:
            code = mmap.mmap(file.fileno(), 0, prot=mmap.PROT_READ)
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("1")
        for held in (private, shared):  # written (a page only read would be the zero page, no memory)
            for offset in range(0, len(held), 4096):
                held[offset] = 1
        sum(code[offset] for offset in range(0, len(code), 4096))
        touched = _touched(smaps)
    finally:
        os.close(smaps)
    assert len(code) == len(library) > 100 * MIB  # read whole, and not counted
    assert 96 * MIB <= touched < 120 * MIB, touched / MIB


def torch_library() -> str:
    import torch

    return str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so")


def test_a_cells_memory_from_two_measures():
    """kernels.used_between: new memory at its peak (the memory group's where there is one, else the
    kernel's own less its libraries' pages plus its RAM disks' gain), or memory held before and
    touched, what it gave back counted as used."""
    start = {"resident": 300 * MIB, "peak": 300 * MIB, "anon": 280 * MIB, "shmem": 0, "file": 20 * MIB,
             "ram_disks": MIB}
    def end(**changes):
        return {**start, "touched": 10 * MIB, **{name: value * MIB for name, value in changes.items()}}
    used = lambda start, end: kernels.used_between(start, end) / MIB  # noqa: E731
    # the code of a library read for the first time is not the kernel's memory; a file on a RAM disk is
    assert used(start, end(peak=340, file=30)) == 30
    assert used(start, end(peak=340, file=30, ram_disks=61)) == 90
    # the memory group's peak counts what the kernel's own measures miss (a file written, then removed)
    assert used({**start, "group_held": 500 * MIB}, {**end(peak=340, file=30), "group_peak": 580 * MIB}) == 80
    # a buffer held before and rewritten; rewritten and freed (given back); an idle cell's own objects
    assert used(start, end(touched=130)) == 130
    assert used(start, end(touched=10, anon=160, resident=180)) == 130
    assert used(start, end()) == 10


@needs_memory_group
def test_memory_is_limited_for_all_of_a_kernels_processes_together(tmp_path):
    """Four children of 700 MiB each stay under a 2 GiB limit per process, not together: the
    OOM killer stops some of them, the kernel lives on, and the notebook says so."""
    nb = run_notebook(tmp_path, [HOLD_MEMORY, """
        children = []
        for _ in range(4):
            pid = os.fork()
            if pid == 0:
                hold(700)
                time.sleep(3)
                os._exit(0)
            children.append(pid)
        print(sorted(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children))""", "print(6 * 7)"],
        memory_limit=2 * 2**30, one_thread=False)  # the limit below the seccomp filter
    codes = eval(nb.cells[1].outputs[0].text)
    assert -9 in codes and 0 in codes, codes  # some were stopped (SIGKILL), not all
    assert nb.cells[2].outputs[0].text == "42\n"
    status, reason = observed_status(nb)
    assert status == "ok" and reason.startswith("out of memory: the notebook's processes together"), reason


@needs_memory_group
def test_a_kernel_stopped_for_memory_says_so(tmp_path):
    """A kernel that fills a memory file (charged to its group, outside its address space) is the
    group's only large process when the group runs out: it is stopped, and the notebook's status
    and reason say why, not only that it died. (Not a kernel and children holding memory side by
    side: which of them the OOM killer stops is the host kernel's choice.)"""
    nb = run_notebook(tmp_path, ["""
        import os
        held = [os.memfd_create("held") for _ in range(128)]
        for _ in range(32):  # 128 files of 32 MiB (under the largest file a kernel may write): 4 GiB
            for file in held:
                os.write(file, b"x" * 2**20)""", "print(6 * 7)"], memory_limit=3 * 2**30)
    assert nb.cells[1].outputs == []  # never ran
    status, reason = observed_status(nb)
    assert status == "error" and "processes together held more than the memory limit" in reason, reason


def test_the_kernels_folder_has_a_size(tmp_path):
    """Files a kernel writes where it works: each limited in size, and all of them together
    (the folder is in the sandbox's /tmp, a RAM disk): the host's disk never fills."""
    out, alive = run_kernel(tmp_path, """
        written = 0
        try:
            for n in range(16):  # 16 files of 32 MiB: 512 MiB
                with open(f"fill{n}", "wb") as f:
                    for _ in range(32):
                        f.write(b"x" * 2**20)
                        written += 1
        except OSError as err:
            print(err.errno, end=" ")
        print(written)""")
    errno, written = map(int, out.split())
    assert (errno, alive) == (28, True) and written <= TMPFS_BYTES // 2**20  # ENOSPC


WRITE_EVERYWHERE = """
    import json, os, subprocess, sys
    from ipykernel.connect import get_connection_file
    sockets = os.path.dirname(get_connection_file())  # in the scratch folder, on the host's disk
    targets = {"sockets": os.path.join(sockets, "note"),
               "scratch": os.path.join(os.path.realpath(sockets), "..", "..", "note"),
               "tmp": "/tmp/note", "shm": "/dev/shm/note", "own folder": "note"}
    wrote = {}
    def write(name):
        try:
            open(targets[name], "w").write("x")
            wrote[name] = True
        except OSError:
            wrote[name] = False
    for name in targets:
        write(name)
    # from a thread the kernel started before the student's code ran: ipykernel's IOPub thread
    sys.stdout.pub_thread.schedule(lambda: write("sockets"))
    sys.stdout.flush()
    # a RAM disk of no size in a namespace of the kernel's own
    mounted = subprocess.run(["unshare", "-Urm", "sh", "-c", "mount -t tmpfs none /tmp && echo mounted"],
                             capture_output=True, text=True).stdout.strip()
    print(json.dumps({"wrote": wrote, "mounted": mounted == "mounted"}))
"""


@pytest.mark.parametrize("warm", [True, False], ids=["forked", "cold"])
def test_a_started_kernel_writes_only_to_its_ram_disks(tmp_path, warm):
    """Once its sockets are bound in the scratch folder (the host's disk where the grader is not
    root), a kernel, its threads and its processes write only in the sandbox's sized RAM disks,
    and mount none of their own (Landlock)."""
    from autograder.sandbox.forkserver import landlock_version

    if not landlock_version():
        pytest.skip("this Linux has no Landlock: a kernel may write to its scratch folder (README)")
    out, alive = run_kernel(tmp_path, WRITE_EVERYWHERE, warm=warm, one_thread=False)  # a kernel that could spawn
    assert alive and json.loads(out) == {
        "wrote": {"sockets": False, "scratch": False, "tmp": True, "shm": True, "own folder": True}, "mounted": False}
