"""Run each grading kernel in a sandbox: bubblewrap's namespaces plus prlimit's limits.

Inside the sandbox a kernel has no network, a read-only view of the system and of
Python (the interpreter, the virtual environment and the check helpers: nothing else of
the repository, so no solutions/, no gradebook, no other student's files), a private
/tmp, /dev/shm and message queues, a read-only /dev, and one writable folder of its own.
It never runs as root: a grader started as root gives each sandbox an unprivileged uid
of its own, so the process limit holds. It talks to nbclient over IPC sockets in a
private folder, since TCP cannot cross into its network namespace.

The notebook's total wall-clock time and the size of its outputs are capped by
``SandboxedExecute``, the nbgrader Execute preprocessor the autograder uses; it also
keeps the code of hidden tests out of everything the kernel shows.
"""
from __future__ import annotations

import asyncio
import atexit
import json
import math
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from queue import Empty

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.output_widget import OutputWidget
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute
from traitlets import Bool, Integer, Type, Unicode

from attention_checks.record import MIME, RECORD_VARIABLE

from autograder.cells import holds_hidden_tests, is_test_cell
from autograder.layout import REPO_ROOT
from autograder.results import OBSERVED, OUTPUT_CUT, executor_error
from autograder.sandbox.cgroups import MemoryGroup
from autograder.sandbox.forkserver import remove

CHECKS_DIR = REPO_ROOT / "attention_checks"
ANSWERS_DIR = CHECKS_DIR / "answers"
FORKSERVER = Path(__file__).resolve().parent / "forkserver.py"
KERNEL_LAUNCHER = FORKSERVER  # the same script, run with --kernel: a cold kernel, isolated as forked ones are
SYSTEM_DIRS = ["/usr", "/bin", "/lib", "/lib64", "/lib32", "/sbin"]
AFTER_HIDDEN_TESTS = ("[output not shown: this cell ran after hidden tests had run, and output from then on could "
                      "show their code]\n")
TMPFS_BYTES = 256 * 1024**2  # the sandbox's /tmp and /dev/shm, each
SYSTEM_FILES = ["/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/alternatives"]
# Every grading kernel's environment has these, sandboxed or not: no bytecode written,
# figures without a display, one thread (the workers already use every core), and the
# checks recording their outcomes for the grader.
KERNEL_ENVIRONMENT = {"PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1",
                      RECORD_VARIABLE: "1"}


def bwrap_available() -> bool:
    tools = ["bwrap", "prlimit"] + (["setpriv"] if _real_root() else [])
    return all(shutil.which(tool) for tool in tools)


# When the grader runs as root (CI, containers), each sandbox runs as a uid of its own from
# this range, with no passwd entry and no files outside the sandbox: the kernel never limits
# the processes of root (RLIMIT_NPROC), and counts those of any other uid machine-wide, so a
# uid per sandbox makes the limit hold for that sandbox alone.
SANDBOX_UIDS = range(2**30, 2**31)


def sandbox_uid() -> int | None:
    """The uid a new sandbox runs as: a fresh unprivileged one when the grader is the real
    root; None otherwise (the grader's own, seen as root in bwrap's user namespace, and
    limited; so is the root of a rootless container, which is another user outside it)."""
    return SANDBOX_UIDS.start + secrets.randbelow(len(SANDBOX_UIDS)) if _real_root() else None


def _real_root() -> bool:
    if os.geteuid() != 0:
        return False
    try:
        with open("/proc/self/uid_map") as uid_map:
            return uid_map.read().split()[:2] == ["0", "0"]  # uid 0 here is uid 0 of the machine
    except OSError:
        return True


def give_to(path: Path, uid: int | None) -> None:
    """Make ``path`` (and what it holds) the sandbox user's, so that a kernel can write there."""
    if uid is None:
        return
    os.chown(path, uid, uid, follow_symlinks=False)
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chown(os.path.join(folder, name), uid, uid, follow_symlinks=False)


def make_scratch(prefix: str, parent: Path | None = None) -> Path:
    """A new folder a sandbox may write to, in ``parent`` (default: the system's temp folder).

    A grader run as root makes it a RAM disk of TMPFS_BYTES, so that a kernel cannot fill the
    machine's disk through it (a write past the size fails, as on a full disk; its pages count
    against the sandbox's memory group too), and so that it goes at once with everything in it,
    whatever modes a kernel gave its folders. Elsewhere it is a plain folder, each file
    limited in size (--fsize) but not the folder."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    if _real_root():
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES},mode=0700", "autograder-scratch",
                        str(folder)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return folder


def remove_scratch(folder: Path) -> None:
    """Remove a folder from ``make_scratch`` and all it holds."""
    if os.path.ismount(folder):
        # lazily: the last processes of a stopped sandbox may still hold it for a moment
        subprocess.run(["umount", "--lazy", str(folder)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    remove(str(folder))  # whatever modes a kernel gave the folders in it


def _system_view() -> list[str]:
    """bwrap arguments for a read-only system: /usr, its merged-usr links, the loader's files."""
    args = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in SYSTEM_FILES:
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args


def _parents(targets: list[str], mounted: list[str]) -> list[str]:
    """bwrap arguments that create the folders leading to ``targets`` readable by anyone:
    bwrap would copy their modes (a Python under /root, mode 700, would be out of reach of
    an unprivileged sandbox user). Folders in what is already ``mounted`` exist, or cannot be made."""
    args, made = [], {"/", "/tmp"}
    for target in targets:
        for parent in reversed(Path(target).parents):
            path = str(parent)
            if path in made or any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounted):
                continue
            made.add(path)
            args += ["--perms", "0755", "--dir", path]
    return args


def python_view() -> list[str]:
    """The folders the kernel's Python needs, read-only: the interpreter, the venv, the checks."""
    folders = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), CHECKS_DIR}
    return sorted(str(f) for f in folders)


def sandbox_command(command: list[str], *, writable: list[Path], chdir: Path, memory_bytes: int,
                    file_bytes: int, processes: int, read_only: list[Path] = (), uid: int | None = None) -> list[str]:
    """``command`` wrapped in bwrap (isolation) and prlimit (resource limits), run as ``uid``
    (from ``sandbox_uid``) when the grader is root."""
    if uid is None:
        # No capabilities, even inside the sandbox's own namespaces (bwrap keeps them when
        # run as root): no mounts, no tracing or signalling past the usual rules.
        isolation, become = ["--unshare-all", "--cap-drop", "ALL"], []
    else:
        # As root, bwrap's user namespace would map the sandbox to root, whose processes the
        # kernel does not count: no user namespace; the sandbox may only change its uid, and
        # setpriv does that at once, for good (no capabilities, no setuid programs after it).
        isolation = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                     "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
                     "--cap-add", "CAP_SETPCAP", "--cap-add", "CAP_DAC_READ_SEARCH"]  # to enter its folder first
        become = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
                  "--inh-caps=-all", "--bounding-set=-all", "--"]
    # /tmp, /dev/shm and the POSIX message queues are the sandbox's own, writable by its user
    # whoever that is; the rest of /dev is read-only (files there would outlive a kernel).
    # Both are RAM: sized, so that a kernel cannot fill the machine's memory through them (a write
    # past the size fails, as on a full disk).
    size = ["--size", str(TMPFS_BYTES)]
    args = ["bwrap", *isolation, "--die-with-parent", "--new-session", "--clearenv", "--proc", "/proc",
            "--dev", "/dev", "--perms", "1777", *size, "--tmpfs", "/dev/shm", "--mqueue", "/dev/mqueue",
            "--remount-ro", "/dev", "--perms", "1777", *size, "--tmpfs", "/tmp", *_system_view()]
    binds = [*python_view(), *map(str, read_only), *map(str, writable)]
    args += _parents(binds, ["/proc", "/dev", *SYSTEM_DIRS])
    for folder in [*python_view(), *map(str, read_only)]:
        args += ["--ro-bind", folder, folder]
    # The checks' answers (references, mistakes) are the grader's: a kernel sees an empty folder.
    args += ["--tmpfs", str(ANSWERS_DIR), "--remount-ro", str(ANSWERS_DIR)]
    for folder in writable:
        args += ["--bind", str(folder), str(folder)]
    args += ["--remount-ro", "/", "--chdir", str(chdir)]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(chdir), "TMPDIR": "/tmp", "LANG": "C.UTF-8",
           "PYTHONPATH": str(CHECKS_DIR.parent), "MPLCONFIGDIR": "/tmp", **KERNEL_ENVIRONMENT}
    for name, value in env.items():
        args += ["--setenv", name, value]
    limits = [f"--nproc={processes}", f"--fsize={file_bytes}", "--nofile=1024", "--core=0"]
    if memory_bytes:
        limits.append(f"--as={memory_bytes}")
    return args + [*become, "prlimit", *limits, "--", *command]


class ForkServerError(RuntimeError):
    """The fork server did not answer (killed, stopped or crashed by a kernel it forked)."""


class ForkServer:
    """A sandbox holding a warm Python (forkserver.py) that forks one kernel per notebook.

    Kernels run one at a time; before the next one starts, the server kills everything
    the last one left running and empties every folder it could write to. A server that
    stops answering is killed with its whole sandbox and started again.
    """

    answer_timeout = 10  # seconds; the server's own work takes milliseconds
    start_timeout = 120  # importing torch on a busy machine

    def __init__(self, limits: dict):
        self.limits = limits
        self.process: subprocess.Popen | None = None
        self.memory_group: MemoryGroup | None = None
        self.dirty = False

    def _start(self) -> None:
        # In the system's temp folder, not the course's: kernels talk over Unix sockets in it,
        # whose paths must stay under 108 bytes.
        self.scratch = make_scratch("autograder-sandbox-")
        self.uid = sandbox_uid()
        give_to(self.scratch, self.uid)
        self.memory_group = MemoryGroup.create(self.limits["memory_bytes"])
        command = sandbox_command([sys.executable, str(FORKSERVER), str(self.scratch)], writable=[self.scratch],
                                  chdir=self.scratch, read_only=[FORKSERVER], uid=self.uid, **self.limits)
        if self.memory_group:
            command = self.memory_group.wrap(command)
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL)
        self._buffer, self.dirty = b"", False
        try:
            hello = self._read_answer(self.start_timeout)
            if not hello.get("ready"):
                raise ForkServerError(f"it started {hello.get('threads')} threads before forking")
        except (ForkServerError, ValueError) as err:
            self.stop()
            raise ForkServerError(f"the fork server did not start: {err}") from err

    def ask(self, op: str, **request) -> dict:
        if self.process is None:
            raise ForkServerError("the fork server is not running")
        try:
            self.process.stdin.write(json.dumps({"op": op, **request}).encode() + b"\n")
            self.process.stdin.flush()
            return self._read_answer(self.answer_timeout)
        except (OSError, ValueError, ForkServerError) as err:
            self.stop()
            raise ForkServerError(f"the fork server failed: {err}") from err

    def _read_answer(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        stdout = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise ForkServerError(f"no answer in {timeout} s")
            chunk = os.read(stdout, 65536)
            if not chunk:
                raise ForkServerError("the sandbox exited")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def prepare(self) -> Path:
        """Make the server ready for the next kernel; returns the folder kernels may write to."""
        self.reset()  # may stop the server (and remove its scratch) when a kernel left something behind
        if self.process is None or self.process.poll() is not None:
            self.stop()
            self._start()
        return self.scratch

    def spawn(self, argv: list[str], cwd: Path) -> "ForkedKernel":
        """A new kernel with ``argv`` (ipykernel's arguments) working in ``cwd`` (inside ``scratch``)."""
        self.dirty = True
        return ForkedKernel(self, self.ask("spawn", argv=argv, cwd=str(cwd))["pid"])

    def reset(self) -> None:
        if self.dirty and self.process is not None:
            try:
                if not self.ask("reset").get("clean"):
                    self.stop()  # something a kernel left could not be removed: the next kernel gets a new sandbox
            except ForkServerError:
                pass  # stopped with its sandbox: the next one starts clean
        self.dirty = False

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()  # bwrap takes its whole sandbox down with it
            self.process.wait()
            for pipe in (self.process.stdin, self.process.stdout):
                try:
                    pipe.close()
                except OSError:  # unflushed request to a dead server
                    pass
            self.process = None
            remove_scratch(self.scratch)
            if self.memory_group:
                self.memory_group.remove()


class ForkedKernel:
    """The part of ``subprocess.Popen`` that jupyter_client uses, for a kernel the fork server made."""

    stdin = stdout = stderr = None

    def __init__(self, server: ForkServer, pid: int):
        self.server, self.pid, self.returncode = server, pid, None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                self.returncode = self.server.ask("poll", pid=self.pid)["exit"]
            except ForkServerError:
                self.returncode = -signal.SIGKILL  # its sandbox is gone, and the kernel with it
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("kernel", timeout)
            time.sleep(0.02)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        # Interrupts go by message; any signal that gets here means "stop".
        if self.poll() is None:
            try:
                self.server.ask("kill", pid=self.pid)
            except ForkServerError:  # the server was stopped, and its sandbox with the kernel in it
                self.returncode = -signal.SIGKILL

    kill = terminate = lambda self: self.send_signal(signal.SIGKILL)


_fork_servers: dict[tuple, ForkServer] = {}


def stop_fork_servers() -> None:
    """Stop this process's fork servers and remove their scratch folders (a worker that stops)."""
    for server in _fork_servers.values():
        server.stop()


def fork_server(limits: dict) -> ForkServer:
    """This process's fork server for these limits (kernels of one worker run one at a time)."""
    key = tuple(sorted(limits.items()))
    if key not in _fork_servers:
        _fork_servers[key] = ForkServer(limits)
        atexit.register(_fork_servers[key].stop)
    return _fork_servers[key]


class SandboxedKernelClient(AsyncKernelClient):
    """jupyter_client's client, ready as soon as the kernel answers and IOPub is connected.

    jupyter_client's own ``wait_for_ready`` then waits for IOPub to stay quiet for 0.2 s,
    as long as the whole notebook takes in a warm kernel. Messages left over from the
    kernel's start are harmless: nbclient keeps only those that answer its requests.
    """

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (math.inf if timeout is None else timeout)
        while time.monotonic() < deadline:
            self.kernel_info()
            try:
                reply = await self.shell_channel.get_msg(timeout=1)
                if reply["msg_type"] == "kernel_info_reply":
                    await self.iopub_channel.get_msg(timeout=1)  # the first message: IOPub is connected
                    self._handle_kernel_info_reply(reply)
                    return
            except Empty:
                pass
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
        raise RuntimeError(f"Kernel didn't respond in {timeout} seconds")


class PrivateIPCKernelManager(AsyncKernelManager):
    """jupyter_client's kernel manager, talking to its kernel over Unix sockets in a folder of
    its own instead of TCP ports: ports are picked free, closed, then bound by the kernel, and
    kernels started at the same time (``--jobs 14``) can pick the same one ("Address already in
    use", the kernel never answers). The grader's kernels never race for a port."""

    def _use_private_ipc(self, folder: Path) -> None:
        self.transport = "ipc"
        self.ip = str(folder / "socket")  # paths under 108 bytes: the system temp folder, not the course's
        self.connection_file = str(folder / "connection.json")

    async def _async_pre_start_kernel(self, **kw):
        self._ipc_dir = Path(tempfile.mkdtemp(prefix="kernel-ipc-"))
        self._use_private_ipc(self._ipc_dir)
        return await super()._async_pre_start_kernel(**kw)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart and getattr(self, "_ipc_dir", None):
            shutil.rmtree(self._ipc_dir, ignore_errors=True)


class SandboxedKernelManager(PrivateIPCKernelManager):
    """A kernel manager that starts its kernel inside the sandbox, in a fresh work folder:
    forked from a warm fork server (the default), or started cold in a sandbox of its own."""

    memory_limit = Integer(4 * 1024**3, help="address-space limit of the kernel in bytes (0: none)").tag(config=True)
    file_size_limit = Integer(64 * 1024**2, help="largest file the kernel may write, in bytes").tag(config=True)
    # RLIMIT_NPROC counts the processes of the sandbox's user (a uid of its own, or a user namespace).
    process_limit = Integer(512, help="processes and threads a sandbox may run").tag(config=True)
    work_root = Unicode("", help="where cold kernels' work folders go (default: the system temp dir)").tag(config=True)
    warm = Bool(True, help="fork kernels from a warm fork server instead of starting each cold").tag(config=True)
    client_factory = Type(SandboxedKernelClient)

    def _limits(self) -> dict:
        return dict(memory_bytes=self.memory_limit, file_bytes=self.file_size_limit, processes=self.process_limit)

    async def _async_pre_start_kernel(self, **kw):
        root = Path(self.work_root or tempfile.gettempdir())
        self._server = None
        if self.warm:
            try:
                self._server = fork_server(self._limits())
                root = self._server.prepare()
            except ForkServerError as err:
                self.log.warning("%s: this kernel starts cold", err)
                self._server = None
        self._uid = self._server.uid if self._server else sandbox_uid()
        # a forked kernel's folder is in its server's scratch; a cold kernel's is a scratch of its own
        self._sandbox_dir = Path(tempfile.mkdtemp(prefix="kernel-", dir=root)) if self._server else make_scratch(
            "kernel-", root)
        # the memory group this kernel's processes are counted in, and its OOM kills before it started
        self._memory = (self._server.memory_group, self._server.memory_group.oom_kills()) \
            if self._server and self._server.memory_group else None
        ipc_dir = self._sandbox_dir / "ipc"
        ipc_dir.mkdir()
        self._use_private_ipc(ipc_dir)  # TCP cannot cross into the sandbox's network namespace
        # Signals cannot reach the kernel through bwrap: interrupt it with a message.
        self.kernel_spec.interrupt_mode = "message"
        started = await AsyncKernelManager._async_pre_start_kernel(self, **kw)
        give_to(self._sandbox_dir, self._uid)  # its sockets, and the connection file it reads
        return started

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        workdir = self._sandbox_dir / "work"
        # The kernel works in a folder of its own, not in nbgrader's: what it writes
        # there (a symlink where nbgrader will write, say) must not touch the course.
        notebook_dir = Path(kw.pop("cwd", None) or ".")
        shutil.copytree(notebook_dir, workdir, ignore=shutil.ignore_patterns("*.ipynb"), symlinks=False)
        give_to(workdir, self._uid)
        if self._server and kernel_cmd[1:3] == ["-m", "ipykernel_launcher"]:
            kernel = self.provisioner.process = self._server.spawn(kernel_cmd[3:], workdir)
            self.provisioner.pid, self.provisioner.pgid = kernel.pid, None
            self._reconcile_connection_info(self.provisioner.connection_info)
            await self._sockets_bound(kernel)
            return
        if kernel_cmd[1:3] == ["-m", "ipykernel_launcher"]:
            kernel_cmd = [kernel_cmd[0], str(KERNEL_LAUNCHER), "--kernel", *kernel_cmd[3:]]
        kw["cwd"] = str(workdir)
        kw.pop("env", None)  # the sandbox sets its own environment
        # What the kernel writes to its real stdout/stderr (not to the notebook) goes nowhere,
        # rather than into the grader's terminal.
        kw["stdin"] = kw["stdout"] = kw["stderr"] = subprocess.DEVNULL
        command = sandbox_command(kernel_cmd, writable=[workdir, self._sandbox_dir / "ipc"], chdir=workdir,
                                  read_only=[KERNEL_LAUNCHER], uid=self._uid, **self._limits())
        group = MemoryGroup.create(self.memory_limit)
        if group:
            command, self._memory = group.wrap(command), (group, 0)
        return await super()._async_launch_kernel(command, **kw)

    def oom_kills(self) -> int:
        """Processes of this kernel's sandbox the OOM killer stopped since the kernel started:
        its processes together held more than ``memory_limit``."""
        group, before = self._memory or (None, 0)
        return group.oom_kills() - before if group else 0

    async def _sockets_bound(self, kernel: ForkedKernel, timeout: float = 30) -> None:
        """Wait until a forked kernel has bound its sockets (within a tenth of a second): a
        client that connects before then waits for ZeroMQ's next reconnection attempt and
        misses the kernel's first messages, which costs jupyter_client a timeout or two."""
        ports = [self.shell_port, self.iopub_port, self.stdin_port, self.control_port, self.hb_port]
        sockets = [Path(f"{self.ip}-{port}") for port in ports]
        deadline = time.monotonic() + timeout
        while not all(socket.exists() for socket in sockets):
            if kernel.poll() is not None or time.monotonic() > deadline:
                return  # nbclient's own startup checks report it
            await asyncio.sleep(0.005)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await AsyncKernelManager._async_cleanup_resources(self, restart=restart)
        if not restart and getattr(self, "_sandbox_dir", None):
            if self._server:
                self._server.reset()
                remove(str(self._sandbox_dir))
            else:
                remove_scratch(self._sandbox_dir)
                if self._memory:
                    self._memory[0].remove()


class ReadOnlyOutputWidget(OutputWidget):
    """nbclient's stand-in for an ``ipywidgets.Output`` that keeps what the kernel shows in it
    but sends nothing back. nbclient's own sends its state to the kernel on the shell socket
    while that socket awaits the cell's reply, which now and then loses the reply until the
    cell times out (jupyter/nbclient#312); a grader has nothing to tell the widget anyway."""

    def sync_state(self) -> None:
        pass


class SandboxedExecute(Execute):
    """nbgrader's Execute with a whole-notebook time limit, a cap on output size, a kernel
    that dies (exit, crash, out of memory) ending the run instead of the grading, and no
    way for the kernel to show the code of hidden tests.

    Once a hidden test has run, its code may be anywhere in the kernel (its history, the
    linecache, a hook the student installed before that saw it compiled), and the student's
    code can print it. So from then on nothing the kernel sends is kept but the check
    records of test cells (whose outputs the grader replaces with its own verdict anyway):
    other cells get a note instead of their output, earlier outputs and widgets are not
    updated, and an error is not copied from the kernel's reply. Test cells also run without
    history (``In``, ``_ih``, ``_i<n>``, ``Out``): not what the guarantee rests on (the kernel
    is the student's), but the obvious places hold nothing.
    """

    notebook_timeout = Integer(300, help="wall-clock seconds for the whole notebook").tag(config=True)
    max_cell_output_bytes = Integer(1024**2, help="output kept per cell; the rest is dropped").tag(config=True)
    max_notebook_output_bytes = Integer(8 * 1024**2, help="output kept per notebook, all cells together; the rest "
                                        "is dropped").tag(config=True)
    max_record_bytes = Integer(64 * 1024**2, help="check records kept per notebook").tag(config=True)

    def __init__(self, **kwargs):
        # nbgrader's Execute would make it jupyter_client's, whose kernels race for TCP ports;
        # the sandbox's configuration still replaces it by SandboxedKernelManager
        kwargs.setdefault("kernel_manager_class", PrivateIPCKernelManager)
        super().__init__(**kwargs)

    def preprocess(self, nb, resources=None, km=None):
        for cell in nb.cells:  # only what this run observes is noted (RebuildFromSource leaves none)
            cell.get("metadata", {}).pop(OBSERVED, None)
        self._deadline = time.monotonic() + self.notebook_timeout
        self._cell_bytes, self._record_bytes, self._stopped = {}, 0, False
        self._notebook_bytes, self._notebook_cut = 0, False
        self._after_hidden, self._interrupted, self._oom_kills_seen = False, False, 0
        # Each cell may run for its own timeout, but never past the notebook's deadline.
        self.timeout_func = lambda cell: max(0.1, min(self.timeout, self._deadline - time.monotonic()))
        return super().preprocess(nb, resources, km=km)

    def preprocess_cell(self, cell, resources, index):
        # Once the kernel died or the notebook's time is up, the remaining cells do not run:
        # their tests get no record, so no points.
        if self._stopped or cell.cell_type != "code":
            return cell, resources
        if time.monotonic() >= self._deadline:
            self._stopped = True
            return self._observe(cell, "notebook_timeout"), resources
        test = is_test_cell(cell)
        self._after_hidden = self._after_hidden or holds_hidden_tests(cell)
        self._interrupted = False
        deadline_first = self._deadline - time.monotonic() < self.timeout  # the notebook's time ends before the cell's
        try:
            self._check_assign_resources(resources)
            cell = self.execute_cell(cell, index, store_history=not test)
            if self._interrupted:  # interrupted at its timeout: the kernel answered, but the cell ran out of time
                self._stopped = deadline_first
                self._observe(cell, "notebook_timeout" if deadline_first else "cell_timeout")
            elif self._new_oom_kills():  # the kernel lived on, one of its processes did not
                self._observe(cell, "process_out_of_memory")
            return cell, self.resources
        except DeadKernelError:
            self._stopped = True
            self._observe(cell, "out_of_memory" if self._new_oom_kills() else "dead_kernel")
        except CellTimeoutError:  # no reply, even to the interrupt: the next cells still get their turn
            self._observe(cell, "cell_timeout")
        return cell, resources

    def _new_oom_kills(self) -> bool:
        """Whether the OOM killer stopped a process of the kernel's sandbox since the last look
        (only where the sandbox has a memory group: a kernel manager with ``oom_kills``)."""
        kills = self.km.oom_kills() if hasattr(self.km, "oom_kills") else 0
        new, self._oom_kills_seen = kills > self._oom_kills_seen, kills
        return new

    @staticmethod
    def _observe(cell, event: str):
        """Note what the grader saw happen in ``cell`` (the notebook's status is read from these
        notes, never from the outputs, which the kernel writes), and show it there."""
        cell.metadata[OBSERVED] = event
        cell.outputs.extend(executor_error(event))
        return cell

    def process_message(self, msg, cell, cell_index):
        if not self._after_hidden or msg["msg_type"] in ("status", "execute_input"):
            return super().process_message(msg, cell, cell_index)
        content = msg["content"]
        if is_test_cell(cell) and msg["msg_type"] == "display_data" and MIME in content.get("data", {}):
            # A record, without a display id: it cannot update any earlier output.
            return super().process_message({**msg, "content": {**content, "transient": {}}}, cell, cell_index)
        if not is_test_cell(cell) and not any(o.get("text") == AFTER_HIDDEN_TESTS for o in cell.outputs):
            cell.outputs.append(new_output("stream", name="stdout", text=AFTER_HIDDEN_TESTS))
        return None

    def on_cell_executed(self, **kwargs):
        # nbgrader copies the error of the kernel's reply into the cell when no output showed
        # it; after a hidden test only our own (a timeout) may be: the kernel's could say anything.
        if not self._after_hidden or self._interrupted:
            super().on_cell_executed(**kwargs)

    async def _async_handle_timeout(self, timeout, cell=None):
        self._interrupted = True
        return await super()._async_handle_timeout(timeout, cell)

    def on_comm_open_jupyter_widget(self, msg):
        # nbclient resets its widget registry for every notebook: swap the Output widget here.
        self.widget_registry["@jupyter-widgets/output"] = {"OutputModel": ReadOnlyOutputWidget}
        return super().on_comm_open_jupyter_widget(msg)

    def output(self, outs, msg, display_id, cell_index):
        # A flood of output in one cell must not push out the records of the tests:
        # records have a budget of their own, everything else a budget per cell.
        size = len(str(msg.get("content", "")))
        if MIME in msg.get("content", {}).get("data", {}):
            self._record_bytes += size
            over, limit = self._record_bytes > self.max_record_bytes, self.max_record_bytes
        else:
            used = self._cell_bytes[cell_index] = self._cell_bytes.get(cell_index, 0) + size
            over, limit = used > self.max_cell_output_bytes, self.max_cell_output_bytes
            if over and used - size <= limit:  # say it once
                outs.append(new_output("stream", name="stdout", text=f"\n[output cut: more than {limit} bytes]\n"))
            # ... and all cells together have a budget: 300 cells of 1 MiB would fill the results
            self._notebook_bytes += 0 if over else size
            if not over and self._notebook_bytes > self.max_notebook_output_bytes:
                over = True
                if not self._notebook_cut:
                    self._notebook_cut = True
                    self.nb.cells[cell_index].metadata[OBSERVED] = "output_cut"
                    outs.append(new_output("stream", name="stdout", text=f"\n{OUTPUT_CUT}\n"))
        return None if over else super().output(outs, msg, display_id, cell_index)

