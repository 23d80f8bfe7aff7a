"""The sandbox itself: the bubblewrap command that isolates a grading process (namespaces,
a read-only view of the system and of Python, sized RAM disks) with prlimit's limits, the
folders a sandbox may write to, and the uid it runs as.

Light on purpose (no PyTorch, no nbgrader, no Jupyter): the command line starts a sandbox's
fork server (``server.py``) before it loads them itself."""
from __future__ import annotations

import fcntl
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from autograder.layout import REPO_ROOT
from autograder.sandbox.forkserver import remove

CHECKS_DIR = REPO_ROOT / "attention_checks"
ANSWERS_DIR = CHECKS_DIR / "answers"
FORKSERVER = Path(__file__).resolve().parent / "forkserver.py"
KERNEL_LAUNCHER = FORKSERVER  # the same script, run with --kernel: a cold kernel, isolated as forked ones are
SYSTEM_DIRS = ["/usr", "/bin", "/lib", "/lib64", "/lib32", "/sbin"]
TMPFS_BYTES = 256 * 1024**2  # the sandbox's /tmp and /dev/shm, each
SCRATCH_INSIDE = "/run/sandbox"  # where the sandbox sees its scratch folder (sandbox_command)
SYSTEM_FILES = ["/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/alternatives"]
# Every grading kernel's environment has these, sandboxed or not: no bytecode written,
# figures without a display, one thread (the workers already use every core), and the
# checks recording their outcomes for the grader (attention_checks.record.RECORD_VARIABLE,
# named here rather than imported: this module must not load PyTorch, so that a sandbox can
# start while the grader loads it; tests/test_sandbox.py holds the two names equal).
KERNEL_ENVIRONMENT = {"PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1",
                      "ATTENTION_CHECKS_RECORD": "1"}
# What a sandbox may use unless configured otherwise (SandboxedKernelManager's settings)
FILE_BYTES = 64 * 1024**2  # the largest file a kernel may write
PROCESSES = 512  # processes and threads of one sandbox


def sandbox_limits(memory_bytes: int, file_bytes: int = FILE_BYTES, processes: int = PROCESSES) -> dict:
    """The limits ``sandbox_command`` takes, as a fork server is keyed by them."""
    return dict(memory_bytes=memory_bytes, file_bytes=file_bytes, processes=processes)


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


# The folders of a warm sandbox's kernel in the temp folder (TMPDIR), each made by tempfile.mkdtemp
# (the prefix and 8 random characters): the sandbox's scratch, the kernel's folder in it, and its
# sockets' folder, where jupyter_client names them socket-1 to socket-5. A Unix socket's path has
# at most 107 bytes (sockaddr_un.sun_path's 108, with the closing NUL).
SANDBOX_SCRATCH_PREFIX, KERNEL_FOLDER_PREFIX, SOCKETS_FOLDER, SOCKET_NAME = "autograder-sandbox-", "kernel-", "ipc", "socket"
SOCKET_PATH_BYTES = 107


def socket_path_problem(temp: str | None = None) -> str | None:
    """Why no kernel can start in the temp folder (TMPDIR, by default), or None: the deepest
    sockets' folder a kernel gets there is too long, and every kernel would fail to start with
    "File name too long"."""
    temp = temp or tempfile.gettempdir()
    random = "x" * 8
    deepest = Path(temp, f"{SANDBOX_SCRATCH_PREFIX}{random}", f"{KERNEL_FOLDER_PREFIX}{random}", SOCKETS_FOLDER)
    return sockets_folder_problem(deepest, f"the temp folder {temp}")


def sockets_folder_problem(folder: Path, name: str | None = None) -> str | None:
    """Why a kernel's sockets cannot be in ``folder`` (called ``name``), or None."""
    length = len(os.fsencode(folder / f"{SOCKET_NAME}-5"))
    if length <= SOCKET_PATH_BYTES:
        return None
    return (f"{name or folder} is too long for the kernels' sockets: their paths there have up to {length} "
            f"bytes, and a Unix socket's at most {SOCKET_PATH_BYTES}. Set TMPDIR to a shorter folder (such as /tmp)")


def matplotlib_font_lists() -> list[Path]:
    """The font lists matplotlib keeps in this user's cache (fontlist-v<N>.json, one per version
    of it): a sandbox's Python, whose /tmp (its MPLCONFIGDIR) starts empty, would otherwise list
    the fonts again at every start (0.3 s). The folder is matplotlib.get_cachedir()'s on Linux,
    found without importing matplotlib, which this light module leaves to the sandbox."""
    cache = os.environ.get("MPLCONFIGDIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "matplotlib")
    return sorted(Path(cache).glob("fontlist-v*.json"))


def make_scratch(prefix: str, parent: Path | None = None) -> Path:
    """A new folder a sandbox may write to, in ``parent`` (default: the system's temp folder).

    A kernel writes there only while it starts (its sockets), where Linux has Landlock
    (``forkserver.confine_writes``). Where it has not, a kernel could write there all along: a
    grader run as root makes it a RAM disk of TMPFS_BYTES, so that a kernel cannot fill the
    machine's disk through it (a write past the size fails, as on a full disk; its pages count
    against the sandbox's memory group too), and so that it goes at once with everything in it,
    whatever modes a kernel gave its folders; elsewhere it is a plain folder, each file limited
    in size (--fsize) but not the folder. This process holds its lock until ``remove_scratch``
    or its end (remove_orphaned_scratch)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    _hold_lock(folder)
    if _real_root():
        try:
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES},mode=0700", "autograder-scratch",
                            str(folder)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except OSError:  # mount could not even start (no process to be had): no folder either
            remove_scratch(folder)
            raise
    return folder


def remove_scratch(folder: Path) -> None:
    """Remove a folder from ``make_scratch`` and all it holds."""
    if os.path.ismount(folder):
        # lazily: the last processes of a stopped sandbox may still hold it for a moment
        subprocess.run(["umount", "--lazy", str(folder)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    remove(str(folder))  # whatever modes a kernel gave the folders in it
    lock = _held_locks.pop(str(folder), None)
    if lock is not None:
        Path(f"{folder}.lock").unlink(missing_ok=True)
        os.close(lock)


# Scratch folder -> the descriptor of its lock (FOLDER.lock, beside it, out of the sandbox's sight),
# held by the process that made the folder: the system lets go of it when that process ends,
# however it ends. A pool's worker ends with os._exit, and a killed one runs nothing at all.
_held_locks: dict[str, int] = {}


def _hold_lock(folder: Path) -> None:
    # taken before the lock file gets its name: no one ever finds it and can take it
    pending = f"{folder}.lock-pending"
    lock = os.open(pending, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    os.rename(pending, f"{folder}.lock")
    _held_locks[str(folder)] = lock


def remove_orphaned_scratch(parent: Path | None = None) -> int:
    """Remove the sandboxes' scratch folders in ``parent`` (default: the system's temp folder)
    whose makers ended without removing them (killed, or a pool worker gone), and their RAM
    disks: those whose lock anyone can take. Returns how many."""
    removed = 0
    for lock_file in Path(parent or tempfile.gettempdir()).glob(f"{SANDBOX_SCRATCH_PREFIX}*.lock"):
        try:
            lock = os.open(lock_file, os.O_RDONLY)
        except OSError:  # removed meanwhile by its maker, or by another grader starting
            continue
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: its maker is alive
            os.close(lock)
            continue
        # the lock is this process's now: the folder goes as if this process had made it
        folder = str(lock_file).removesuffix(".lock")
        _held_locks[folder] = lock
        remove_scratch(Path(folder))
        removed += 1
    return removed


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


def sandbox_command(command: list[str], *, scratch: Path, memory_bytes: int, file_bytes: int, processes: int,
                    read_only: list[Path] = (), uid: int | None = None) -> list[str]:
    """``command`` wrapped in bwrap (isolation) and prlimit (resource limits), run as ``uid``
    (from ``sandbox_uid``) when the grader is root, in /tmp.

    ``scratch`` (from ``make_scratch``) is the one folder of the host the sandbox may write to:
    the grader puts the kernels' sockets and connection files there. It is mounted at
    SCRATCH_INSIDE, outside the sandbox's /tmp, and reached at its own path too, through a
    link: a kernel binds its sockets there while it starts, and then confines its writes to
    /tmp and /dev (``forkserver.confine_writes``), which a folder below /tmp would escape."""
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
    binds = [*python_view(), *map(str, read_only), str(scratch), SCRATCH_INSIDE]
    args += _parents(binds, ["/proc", "/dev", *SYSTEM_DIRS])
    for folder in [*python_view(), *map(str, read_only)]:
        args += ["--ro-bind", folder, folder]
    # The checks' answers (references, mistakes) are the grader's: a kernel sees an empty folder.
    args += ["--tmpfs", str(ANSWERS_DIR), "--remount-ro", str(ANSWERS_DIR)]
    args += ["--bind", str(scratch), SCRATCH_INSIDE, "--symlink", SCRATCH_INSIDE, str(scratch)]
    args += ["--remount-ro", "/", "--chdir", "/tmp"]
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
           "PYTHONPATH": str(CHECKS_DIR.parent), "MPLCONFIGDIR": "/tmp", **KERNEL_ENVIRONMENT}
    for name, value in env.items():
        args += ["--setenv", name, value]
    limits = [f"--nproc={processes}", f"--fsize={file_bytes}", "--nofile=1024", "--core=0"]
    if memory_bytes:
        limits.append(f"--as={memory_bytes}")
    return args + [*become, "prlimit", *limits, "--", *command]
