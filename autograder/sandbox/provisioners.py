"""How the grader's kernels are started: jupyter_client kernel provisioners, its public API for
launching kernels, registered as entry points in pyproject.toml (``jupyter_client.kernel_provisioners``)
and named by the kernel managers of autograder/sandbox/kernels.py (by the names of
registration.py).

- ``PrivateIPCProvisioner``: jupyter_client's local provisioner, over Unix sockets in a folder of
  the kernel's own instead of TCP ports (``grade --no-sandbox``).
- ``SandboxProvisioner``: the kernel inside the sandbox, in a fresh work folder: forked from a
  warm fork server (the default), or started cold in a sandbox of its own.
"""
from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from jupyter_client.provisioning import LocalProvisioner

from autograder.sandbox.bwrap import (KERNEL_FOLDER_PREFIX, KERNEL_LAUNCHER, SOCKET_NAME, SOCKETS_FOLDER, give_to,
                                      make_scratch, remove_scratch, sandbox_command, sandbox_uid,
                                      sockets_folder_problem)
from autograder.sandbox.cgroups import MemoryGroup
from autograder.sandbox.forkserver import remove
from autograder.sandbox.server import ForkedKernel, ForkServer, ForkServerError, fork_server


def use_private_ipc(km, folder: Path) -> None:
    """Make the kernel manager ``km`` talk to its kernel over Unix sockets in ``folder``. Ports are
    picked free, closed, then bound by the kernel, and kernels started at the same time
    (``--jobs 14``) can pick the same one ("Address already in use", the kernel never answers);
    a socket in a folder of its own is never another kernel's."""
    problem = sockets_folder_problem(folder)  # in the system temp folder: a socket's path is short
    if problem:
        raise OSError(problem)
    km.transport = "ipc"
    km.ip = str(folder / SOCKET_NAME)
    km.connection_file = str(folder / "connection.json")


class PrivateIPCProvisioner(LocalProvisioner):
    """jupyter_client's local provisioner, over Unix sockets in a folder of the kernel's own."""

    ipc_folder: Path | None = None

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        if self.ipc_folder is None:  # a restarted kernel keeps its folder
            self.ipc_folder = Path(tempfile.mkdtemp(prefix="kernel-ipc-"))
        use_private_ipc(self.parent, self.ipc_folder)
        return await super().pre_launch(**kwargs)

    async def cleanup(self, restart: bool = False) -> None:
        await super().cleanup(restart=restart)
        if not restart and self.ipc_folder is not None:
            shutil.rmtree(self.ipc_folder, ignore_errors=True)


class SandboxProvisioner(LocalProvisioner):
    """The kernel inside the sandbox, in a fresh work folder of its own, with the settings and
    limits of its kernel manager (``SandboxedKernelManager``, this provisioner's parent).

    A kernel forked from a warm fork server is the server's child: what jupyter_client needs of
    its process (poll, wait, signals) is a ``ForkedKernel``. A cold kernel is a bwrap process,
    started as the local provisioner starts any kernel."""

    server: ForkServer | None = None
    sandbox_dir: Path | None = None
    uid: int | None = None
    # the memory group this kernel's processes are counted in, and its OOM kills before it started
    memory_group: tuple[MemoryGroup, int] | None = None

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        km = self.parent
        root = Path(km.work_root or tempfile.gettempdir())
        self.server = None
        if km.warm:
            try:
                self.server = fork_server(km.limits())
                root = self.server.prepare()
            except ForkServerError as err:
                self.log.warning("%s: this kernel starts cold", err)
                self.server = None
        self.uid = self.server.uid if self.server else sandbox_uid()
        # a forked kernel's folder is in its server's scratch; a cold kernel's is a scratch of its own
        self.sandbox_dir = Path(tempfile.mkdtemp(prefix=KERNEL_FOLDER_PREFIX, dir=root)) if self.server \
            else make_scratch(KERNEL_FOLDER_PREFIX, root)
        self.memory_group = (self.server.memory_group, self.server.memory_group.oom_kills()) \
            if self.server and self.server.memory_group else None
        ipc_dir = self.sandbox_dir / SOCKETS_FOLDER
        ipc_dir.mkdir()
        use_private_ipc(km, ipc_dir)  # TCP cannot cross into the sandbox's network namespace
        launch = await super().pre_launch(**kwargs)  # writes the connection file
        give_to(self.sandbox_dir, self.uid)  # its sockets, and the connection file it reads
        return launch

    async def launch_kernel(self, cmd: list[str], **kwargs: Any):
        km = self.parent
        workdir = self.sandbox_dir / "work"
        # The kernel works in a folder of its own in the sandbox's /tmp (forkserver.KERNEL_FOLDER), not
        # in nbgrader's: what it writes (a symlink where nbgrader will write, say) must not touch the
        # course. It gets a copy of the files beside the notebook, through this folder.
        notebook_dir = Path(kwargs.pop("cwd", None) or ".")
        shutil.copytree(notebook_dir, workdir, ignore=shutil.ignore_patterns("*.ipynb"), symlinks=False)
        give_to(workdir, self.uid)
        ipykernel = cmd[1:3] == ["-m", "ipykernel_launcher"]
        if self.server and ipykernel:
            self.process = self.server.spawn(cmd[3:], workdir, km.one_thread)
            self.pid, self.pgid, self.cwd = self.process.pid, None, workdir
            await self._sockets_bound(self.process)
            return self.connection_info
        if ipykernel:
            launch = "--kernel" if km.one_thread else "--kernel-with-threads"
            cmd = [cmd[0], str(KERNEL_LAUNCHER), launch, str(workdir), *cmd[3:]]
        kwargs["cwd"] = str(workdir)
        kwargs.pop("env", None)  # the sandbox sets its own environment
        # What the kernel writes to its real stdout/stderr (not to the notebook) goes nowhere,
        # rather than into the grader's terminal.
        kwargs["stdin"] = kwargs["stdout"] = kwargs["stderr"] = subprocess.DEVNULL
        command = sandbox_command(cmd, scratch=self.sandbox_dir, read_only=[KERNEL_LAUNCHER], uid=self.uid,
                                  **km.limits())
        group = MemoryGroup.create(km.memory_limit)
        if group:
            command, self.memory_group = group.wrap(command), (group, 0)
        return await super().launch_kernel(command, **kwargs)

    async def _sockets_bound(self, kernel: ForkedKernel, timeout: float = 30) -> None:
        """Wait until a forked kernel has bound its sockets (within a tenth of a second): a
        client that connects before then waits for ZeroMQ's next reconnection attempt and
        misses the kernel's first messages, which costs jupyter_client a timeout or two."""
        info = self.connection_info
        ports = [info[f"{channel}_port"] for channel in ("shell", "iopub", "stdin", "control", "hb")]
        sockets = [Path(f"{info['ip']}-{port}") for port in ports]
        deadline = time.monotonic() + timeout
        while not all(socket.exists() for socket in sockets):
            if kernel.poll() is not None or time.monotonic() > deadline:
                return  # nbclient's own startup checks report it
            await asyncio.sleep(0.005)

    def ask_server(self, operation: str, **arguments) -> dict:
        """The fork server's answer about this kernel (an operation of forkserver.py: ``inspect``,
        ``memory``); {} for a cold kernel, or one whose server or process is gone."""
        if not self.server or self.process is None:
            return {}
        try:
            return self.server.ask(operation, pid=self.process.pid, **arguments)
        except ForkServerError:
            return {}

    def oom_kills(self) -> int:
        group, before = self.memory_group or (None, 0)
        return group.oom_kills() - before if group else 0

    async def cleanup(self, restart: bool = False) -> None:
        await super().cleanup(restart=restart)
        if not restart and self.sandbox_dir is not None:
            if self.server:
                self.server.reset()
                remove(str(self.sandbox_dir))
            else:
                remove_scratch(self.sandbox_dir)
                if self.memory_group:
                    self.memory_group[0].remove()
