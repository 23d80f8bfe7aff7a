"""Run each grading kernel in a sandbox: bubblewrap's namespaces plus prlimit's limits.

Inside the sandbox a kernel has no network, a read-only view of the system and of
Python (the interpreter, the virtual environment and the check helpers: nothing else of
the repository, so no solutions/, no gradebook, no other student's files), a private
/tmp, and one writable folder of its own. It talks to nbclient over IPC sockets in a
private folder, since TCP cannot cross into its network namespace.

The notebook's total wall-clock time and the size of its outputs are capped by
``SandboxedExecute``, the nbgrader Execute preprocessor the autograder uses.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute
from traitlets import Integer, Unicode

from attention_checks.record import MIME

CHECKS_DIR = Path(__file__).resolve().parent.parent / "attention_checks"
SYSTEM_DIRS = ["/usr", "/bin", "/lib", "/lib64", "/lib32", "/sbin"]
DEAD_KERNEL = "the kernel died while running this cell (exit, crash or out of memory); later cells did not run"
SYSTEM_FILES = ["/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/alternatives"]


def bwrap_available() -> bool:
    return shutil.which("bwrap") is not None and shutil.which("prlimit") is not None


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


def python_view() -> list[str]:
    """The folders the kernel's Python needs, read-only: the interpreter, the venv, the checks."""
    folders = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), CHECKS_DIR}
    return sorted(str(f) for f in folders)


def sandbox_command(command: list[str], *, workdir: Path, ipc_dir: Path, memory_bytes: int,
                    file_bytes: int, processes: int) -> list[str]:
    """``command`` wrapped in bwrap (isolation) and prlimit (resource limits)."""
    args = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", *_system_view()]
    for folder in python_view():
        args += ["--ro-bind", folder, folder]
    args += ["--bind", str(workdir), str(workdir), "--bind", str(ipc_dir), str(ipc_dir),
             "--remount-ro", "/", "--chdir", str(workdir)]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(workdir), "TMPDIR": "/tmp", "LANG": "C.UTF-8",
           "PYTHONPATH": str(CHECKS_DIR.parent), "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg",
           "MPLCONFIGDIR": "/tmp", "OMP_NUM_THREADS": "1", "ATTENTION_CHECKS_RECORD": "1"}
    for name, value in env.items():
        args += ["--setenv", name, value]
    limits = [f"--nproc={processes}", f"--fsize={file_bytes}", "--nofile=1024", "--core=0"]
    if memory_bytes:
        limits.append(f"--as={memory_bytes}")
    return args + ["prlimit", *limits, "--", *command]


class SandboxedKernelManager(AsyncKernelManager):
    """A kernel manager that starts its kernel inside the sandbox, in a fresh work folder."""

    memory_limit = Integer(4 * 1024**3, help="address-space limit of the kernel in bytes (0: none)").tag(config=True)
    file_size_limit = Integer(64 * 1024**2, help="largest file the kernel may write, in bytes").tag(config=True)
    # RLIMIT_NPROC counts every process of the real user, so keep headroom on a busy machine.
    process_limit = Integer(512, help="processes and threads (of the grading user) the kernel may run").tag(config=True)
    work_root = Unicode("", help="where the kernels' work folders go (default: the system temp dir)").tag(config=True)

    async def _async_pre_start_kernel(self, **kw):
        self._sandbox_dir = Path(tempfile.mkdtemp(prefix="kernel-", dir=self.work_root or None))
        ipc_dir = self._sandbox_dir / "ipc"
        ipc_dir.mkdir()
        self.transport = "ipc"
        self.ip = str(ipc_dir / "socket")
        self.connection_file = str(ipc_dir / "connection.json")
        # Signals cannot reach the kernel through bwrap: interrupt it with a message.
        self.kernel_spec.interrupt_mode = "message"
        return await super()._async_pre_start_kernel(**kw)

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        workdir = self._sandbox_dir / "work"
        # The kernel works in a folder of its own, not in nbgrader's: what it writes
        # there (a symlink where nbgrader will write, say) must not touch the course.
        notebook_dir = Path(kw.pop("cwd", None) or ".")
        shutil.copytree(notebook_dir, workdir, ignore=shutil.ignore_patterns("*.ipynb"), symlinks=False)
        kw["cwd"] = str(workdir)
        kw.pop("env", None)  # the sandbox sets its own environment
        # What the kernel writes to its real stdout/stderr (not to the notebook) goes nowhere,
        # rather than into the grader's terminal.
        kw["stdin"] = kw["stdout"] = kw["stderr"] = subprocess.DEVNULL
        command = sandbox_command(kernel_cmd, workdir=workdir, ipc_dir=self._sandbox_dir / "ipc",
                                  memory_bytes=self.memory_limit, file_bytes=self.file_size_limit,
                                  processes=self.process_limit)
        return await super()._async_launch_kernel(command, **kw)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart and getattr(self, "_sandbox_dir", None):
            shutil.rmtree(self._sandbox_dir, ignore_errors=True)


class SandboxedExecute(Execute):
    """nbgrader's Execute with a whole-notebook time limit, a cap on output size, and a
    kernel that dies (exit, crash, out of memory) ending the run instead of the grading."""

    notebook_timeout = Integer(300, help="wall-clock seconds for the whole notebook").tag(config=True)
    max_cell_output_bytes = Integer(1024**2, help="output kept per cell; the rest is dropped").tag(config=True)
    max_record_bytes = Integer(64 * 1024**2, help="check records kept per notebook").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        deadline = time.monotonic() + self.notebook_timeout
        self._cell_bytes, self._record_bytes, self._dead = {}, 0, False
        # Each cell may run for its own timeout, but never past the notebook's deadline.
        self.timeout_func = lambda cell: max(1, min(self.timeout, int(deadline - time.monotonic())))
        return super().preprocess(nb, resources, km=km)

    def preprocess_cell(self, cell, resources, index):
        if self._dead:
            return cell, resources  # the cells after a dead kernel do not run: their tests get no record
        try:
            return super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            self._dead = True
            cell.outputs.append(_error("DeadKernelError", DEAD_KERNEL))
        except CellTimeoutError:  # no reply, even to the interrupt: the next cells still get their turn
            cell.outputs.append(_error("CellTimeoutError", "the cell did not finish in time"))
        return cell, resources

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
        return None if over else super().output(outs, msg, display_id, cell_index)


def _error(ename: str, evalue: str):
    return new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])
