"""A sandbox holding a warm Python that forks the grading kernels (``forkserver.py`` runs in
it), one per worker process and per set of limits; the grader talks to it over a pipe.

Light on purpose, as ``bwrap.py``: the command line launches one before it loads PyTorch."""
from __future__ import annotations

import json
import multiprocessing.util
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from autograder.options import GradingOptions
from autograder.sandbox.bwrap import (FORKSERVER, SANDBOX_SCRATCH_PREFIX, bwrap_available, give_to, make_scratch,
                                      matplotlib_font_lists, remove_orphaned_scratch, remove_scratch, sandbox_command,
                                      sandbox_limits, sandbox_uid)
from autograder.sandbox.cgroups import MemoryGroup


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
        self.ready = False  # its Python said it is ready to fork kernels

    def launch(self) -> None:
        """Start the sandbox and its Python, without waiting for it to be ready (``prepare``
        waits): its imports then run while the grader does other work."""
        # In the system's temp folder, not the course's: kernels talk over Unix sockets in it,
        # whose paths must stay short (bwrap.socket_path_problem).
        self.scratch, self.memory_group = None, None
        remove_orphaned_scratch()  # what killed graders left: each a RAM disk where root grades
        try:
            self.scratch = make_scratch(SANDBOX_SCRATCH_PREFIX)
            self.uid = sandbox_uid()
            give_to(self.scratch, self.uid)
            self.memory_group = MemoryGroup.create(self.limits["memory_bytes"])
            fonts = matplotlib_font_lists()  # read-only: the server copies them into its /tmp
            command = sandbox_command([sys.executable, str(FORKSERVER), str(self.scratch), *map(str, fonts)],
                                      scratch=self.scratch, read_only=[FORKSERVER, *fonts], uid=self.uid, **self.limits)
            if self.memory_group:
                command = self.memory_group.wrap(command)
            self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=subprocess.DEVNULL)
        except OSError as err:  # no process to be had (EAGAIN, ENOMEM): nothing of it is left
            if self.scratch is not None:
                remove_scratch(self.scratch)
            if self.memory_group:
                self.memory_group.remove()
            raise ForkServerError(f"the fork server did not start: {err}") from err
        self._buffer, self.dirty, self.ready = b"", False, False

    def _wait_until_ready(self) -> None:
        try:
            hello = self._read_answer(self.start_timeout)
            if not hello.get("ready"):
                raise ForkServerError(f"it started {hello.get('threads')} threads before forking")
        except (ForkServerError, ValueError) as err:
            self.stop()
            raise ForkServerError(f"the fork server did not start: {err}") from err
        self.ready = True

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
            self.launch()
        if not self.ready:
            self._wait_until_ready()
        return self.scratch

    def spawn(self, argv: list[str], files: Path, one_thread: bool = True) -> "ForkedKernel":
        """A new kernel with ``argv`` (ipykernel's arguments), working with a copy of the files in
        ``files`` (a folder in ``scratch``), whose cells can start no thread nor process (``one_thread``)."""
        self.dirty = True
        return ForkedKernel(self, self.ask("spawn", argv=argv, files=str(files), one_thread=one_thread)["pid"])

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


def stop_fork_servers(keeping: dict | None = None) -> None:
    """Stop this process's fork servers and remove their scratch folders (a worker that stops).
    With ``keeping`` (the limits of a worker's next run), only those of other limits that no
    kernel is using: another run on the same worker may have one running in its own."""
    for key, server in _fork_servers.items():
        if keeping is None or (key != _key(keeping) and not server.dirty):
            server.stop()


def launch_fork_server(limits: dict) -> None:
    """Start this process's fork server for ``limits`` (``bwrap.sandbox_limits``) now, without
    waiting for it: its Python imports PyTorch while the caller goes on (loading the grader,
    preparing the course), and the first kernel finds it ready, or nearly."""
    server = fork_server(limits)
    if server.process is None:
        try:
            server.launch()
        except ForkServerError:
            pass  # the first kernel tries again, and starts cold if it must


def launch_warm_sandbox(options: GradingOptions) -> None:
    """``launch_fork_server`` for grading with ``options``, where they grade in warm sandboxed
    kernels and bubblewrap is here (else the course says what is missing when it is made)."""
    if options.sandbox and options.warm_kernels and bwrap_available():
        launch_fork_server(sandbox_limits(options.memory_limit))


def fork_server(limits: dict) -> ForkServer:
    """This process's fork server for these limits (kernels of one worker run one at a time)."""
    key = _key(limits)
    if key not in _fork_servers:
        _fork_servers[key] = ForkServer(limits)
        # stopped, its scratch folder unmounted and removed, as this process ends: multiprocessing's
        # exit handlers run in a pool's worker too, which ends with os._exit (atexit's never run there)
        multiprocessing.util.Finalize(None, _fork_servers[key].stop, exitpriority=0)
    return _fork_servers[key]


def _key(limits: dict) -> tuple:
    return tuple(sorted(limits.items()))
