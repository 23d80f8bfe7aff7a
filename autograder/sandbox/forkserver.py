"""The fork server: one warm Python per sandbox that forks a fresh kernel for each notebook.

Starting a kernel and importing torch costs about two seconds; the tests of a notebook
need a fraction of that. This script runs *inside* a grading sandbox (see sandbox.py),
imports what every grading kernel needs once, and then forks a kernel per notebook on
request: the child starts with torch already in memory (copy-on-write), and whatever
it patches stays in its own process.

It talks to the grader over its stdin and stdout, one JSON object per line:

    {"op": "spawn", "argv": [...], "files": ..., "one_thread": true} -> {"pid": n}
    {"op": "poll", "pid": n}         -> {"exit": null} while it runs, else its exit status
    {"op": "kill", "pid": n}         -> {} once the kernel is gone
    {"op": "inspect", "pid": n}      -> {"seccomp": mode, "threads": n, "processes": n}: the kernel's
                                        seccomp mode and threads (/proc), and the sandbox's
                                        processes but its init and the server
    {"op": "memory", "pid": n, "reset": bool}
                                     -> {"resident": bytes, "peak": bytes, "anon": bytes, "shmem": bytes,
                                         "file": bytes, "ram_disks": bytes, "touched": bytes}: the
                                        kernel's resident memory now, its peak since the last reset
                                        (or its start), what it holds now of each kind (anonymous,
                                        shared, files' pages), what the sandbox's RAM disks hold, and
                                        (but at a reset) how much of its memory (anonymous, shared, on
                                        a RAM disk: not its libraries' code) it read or wrote since the
                                        last reset; a reset first makes the peak what is resident now
                                        and marks every page unused
    {"op": "reset"}                  -> {"killed": n, "clean": bool}: every other process of
                                        the sandbox killed, /tmp, /dev/shm, SysV IPC, POSIX
                                        message queues, the user's keyrings and the scratch
                                        folder emptied, ready for the next student (clean:
                                        nothing was left; else the grader starts a new sandbox)

Each kernel works in KERNEL_FOLDER (in the sandbox's /tmp), with a copy of the files the grader
put beside the notebook (``files``), and writes nowhere but /tmp and /dev once its sockets are
bound (``confine_writes``).

Run as ``forkserver.py SCRATCH [FONT_LIST...]``: SCRATCH is the sandbox's scratch folder (at the
host's path: a link to where the sandbox mounts it), each FONT_LIST a matplotlib font list of the
grader's, copied into its own matplotlib cache. Run as ``forkserver.py --kernel FILES ARGV...``
it is a cold kernel instead, isolated the same way.

It must not import anything of the autograder (the sandbox cannot see it), nor start a
thread before forking (a thread's locks would be copied half-held).
"""
from __future__ import annotations

import ctypes
import errno
import functools
import gc
import json
import os
import platform
import re
import shutil
import signal
import stat
import sys
import threading
import time

# What the grading kernels import: the kernel itself, and what the notebooks and their
# checks use (torch's symbolic shapes come with nested tensors, the widgets with chapter 2).
PRELOAD = ["ipykernel.kernelapp", "ipykernel.ipkernel", "IPython", "torch", "torch.nn", "torch.nn.functional",
           "torch.fx.experimental.symbolic_shapes", "numpy", "matplotlib.pyplot", "matplotlib.backends.backend_agg",
           "matplotlib_inline.backend_inline", "ipywidgets", "attention_checks.registry",
           # (not torch._dynamo, 0.8 s: the checks never load it, and 3 of 341 corpus notebooks do)
           # ... and what a kernel imports while it starts (debugger, history, event loop):
           # about 150 modules, a tenth of a second of every kernel's start.
           "ipykernel.debugger", "IPython.core.debugger", "IPython.core.completerlib",
           "IPython.extensions.storemagic", "psutil", "sqlite3", "tornado.platform.asyncio", "tornado.queues",
           "tornado.locks", "http.server", "xmlrpc.server", "pydoc", "faulthandler"]
PR_SET_DUMPABLE = 4
IPC_RMID = 0
# Keyrings (keyctl(2)): glibc has no wrapper, so by syscall number.
SYS_KEYCTL = {"x86_64": 250, "aarch64": 219}.get(platform.machine())
KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_CLEAR, KEYCTL_GET_PERSISTENT = 1, 7, 22
KEY_SPEC_PROCESS_KEYRING, KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING = -2, -4, -5
_libc = ctypes.CDLL(None, use_errno=True)
_exit_codes: dict[int, int] = {}  # kernels reaped by kill(), for the next poll()
# Each kernel's /proc/PID/clear_refs and smaps, opened by the server while the kernel let it (``spawn``):
# writing "1" to clear_refs marks all its pages unused, so that each mapping's "Referenced" in smaps
# grows by those it reads or writes ("2" would mark its anonymous pages only, and a shared mapping made
# before, such as a tensor's share_memory_(), could be rewritten unseen); "5" makes its peak resident
# memory (VmHWM) what it holds now.
_memory_files: dict[int, tuple[int, int]] = {}
CLEAR_REFS_USED, CLEAR_REFS_PEAK = b"1", b"5"
# smaps' first line of a mapping: "start-end perms offset major:minor inode path"
MAPPING = re.compile(rb"^[0-9a-f]+-[0-9a-f]+ \S+ \S+ ([0-9a-f]+:[0-9a-f]+) (\d+)", re.M)

# Where a kernel works (its current folder and HOME): in the sandbox's /tmp, a RAM disk with a size.
KERNEL_FOLDER = "/tmp/work"
# The sandbox's RAM disks, whose files hold memory as much as the kernel's own pages do (bwrap.py)
RAM_DISKS = ("/tmp", "/dev/shm")
# A kernel's allocator gives every block of at least this size its own mapping, returned to the system
# when freed (mallopt's M_MMAP_THRESHOLD, which also stops glibc from raising the threshold as it goes):
# the memory a kernel holds is then what its live tensors hold, not what freed ones left in its heap
# in an order that changes from one run to the next (a whole row of tiles measured 145 to 216 MiB)
M_MMAP_THRESHOLD, OWN_MAPPING_BYTES = -3, 2**20
# Landlock (Linux 5.13+), by which a process gives up rights for itself and the processes it
# starts, without privileges: its three system calls have these numbers on every architecture.
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION, LANDLOCK_RULE_PATH_BENEATH, PR_SET_NO_NEW_PRIVS = 1, 1, 38
# What writing is, by Landlock's version: writing a file, removing or making any kind of entry
# (file, folder, link, socket, pipe, device); from version 2 linking or renaming across folders,
# from 3 truncating.
WRITE_RIGHTS = {1: 0x1FF2, 2: 0x3FF2, 3: 0x7FF2}
# Where a started kernel may still write: the sandbox's RAM disks (/tmp, /dev/shm, /dev/mqueue)
# and its devices (/dev/null). The rest of the sandbox is read-only, but for its scratch folder.
WRITABLE = ("/tmp", "/dev")


def preload() -> None:
    for module in PRELOAD:
        __import__(module)
    from attention_checks.registry import load_all  # every assignment's checks (never their answers)

    load_all()
    # Everything imported so far lives as long as the server: out of the garbage collector's
    # sight, the kernels' collections neither scan it nor copy its pages (copy-on-write).
    gc.collect()
    gc.freeze()
    # A non-dumpable process cannot be traced or have its memory read or written by
    # processes of the same user: a kernel cannot tamper with the server that forks the
    # next student's kernel, nor (the flag is inherited) with another kernel.
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


class _PathBeneath(ctypes.Structure):  # struct landlock_path_beneath_attr
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_version() -> int:
    """Landlock's version on this Linux; 0 where it has none (older than 5.13, or switched off)."""
    return max(_libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                             ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION)), 0)


def confine_writes() -> bool:
    """From now on, this thread and every process and thread it starts write only below
    WRITABLE (and mount nothing, in any namespace: Landlock forbids it). Running threads
    keep their rights: call it before the first. False where Linux has no Landlock."""
    version = landlock_version()
    if not version:
        return False
    rights = WRITE_RIGHTS[min(version, max(WRITE_RIGHTS))]
    handled = ctypes.c_uint64(rights)  # struct landlock_ruleset_attr's first field, as every version has it
    ruleset = _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(handled), ctypes.c_size_t(8), ctypes.c_uint32(0))
    if ruleset < 0:
        return False
    try:
        for folder in WRITABLE:
            rule = _PathBeneath(rights, os.open(folder, os.O_PATH | os.O_CLOEXEC))
            try:
                added = _libc.syscall(SYS_LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH, ctypes.byref(rule), 0)
            finally:
                os.close(rule.parent_fd)
            if added != 0:
                return False
        _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # Landlock's condition for the unprivileged
        return _libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) == 0
    finally:
        os.close(ruleset)


# A seccomp filter (seccomp(2)), by which a process forbids itself and its threads system calls:
# one for "no new thread, no new process" (clone, clone3, fork, vfork), as classic BPF over
# struct seccomp_data (the call's number at offset 0, its architecture's at 4).
SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}.get(platform.machine())
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC = 1, 1
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
BPF_LD_W_ABS, BPF_JEQ_K, BPF_JGE_K, BPF_RET_K = 0x20, 0x15, 0x35, 0x06
# the architecture's audit number, and its calls that make a thread or a process: clone3 answers
# ENOSYS (glibc then tries clone, which has no flags to tell a thread from a process but says
# EPERM), the others EPERM. x86-64's x32 calls (numbers from 2**30) are refused, and so is every
# call of another architecture's (32-bit calls through int 0x80 on x86-64).
SPAWNING_CALLS = {"x86_64": (0xC000003E, {56: "EPERM", 57: "EPERM", 58: "EPERM", 435: "ENOSYS"}),
                  "aarch64": (0xC00000B7, {220: "EPERM", 435: "ENOSYS"})}.get(platform.machine())
X32_CALLS = 0x40000000
# Seen by the grader in the kernel's /proc/PID/status: 2 is "filtering"
SECCOMP_FILTERING = 2


class _SockFilter(ctypes.Structure):  # struct sock_filter
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):  # struct sock_fprog
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


def _spawning_filter() -> list[tuple[int, int, int, int]]:
    """The BPF program: refuse SPAWNING_CALLS' calls (and every call of another ABI), allow the rest."""
    audit_arch, calls = SPAWNING_CALLS
    refuse = SECCOMP_RET_ERRNO | errno.EPERM
    program = [(BPF_LD_W_ABS, 0, 0, 4), (BPF_JEQ_K, 1, 0, audit_arch), (BPF_RET_K, 0, 0, refuse),
               (BPF_LD_W_ABS, 0, 0, 0)]
    if platform.machine() == "x86_64":
        program += [(BPF_JGE_K, 0, 1, X32_CALLS), (BPF_RET_K, 0, 0, refuse)]
    for number, answer in calls.items():
        program += [(BPF_JEQ_K, 0, 1, number), (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | getattr(errno, answer))]
    return program + [(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW)]


def forbid_new_threads_and_processes() -> bool:
    """From now on, no thread of this process (those running included: TSYNC) can start a thread
    or a process, nor can anything it runs (a filter is inherited and outlives execve): the calls
    fail, and Python says so in the cell that tried ("can't start new thread", an OSError of
    os.fork or subprocess). Nothing undoes it. False where Linux or this architecture has no
    seccomp filter; the grader reads the kernel's state from outside anyway (``confinement``)."""
    if SYS_SECCOMP is None or SPAWNING_CALLS is None:
        return False
    program = _spawning_filter()
    instructions = (_SockFilter * len(program))(*(_SockFilter(*i) for i in program))
    fprog = _SockFprog(len(program), instructions)
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # seccomp's condition for the unprivileged
    return _libc.syscall(SYS_SECCOMP, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, ctypes.byref(fprog)) == 0


def keep_pytorch_in_one_thread() -> None:
    """``torch.set_num_threads(n)`` leaves PyTorch at one thread, with a warning: past the seccomp
    filter, OpenMP would fail to start its threads at the next operator and end the kernel."""
    import torch

    set_num_threads = torch.set_num_threads

    def one_thread(threads: int) -> None:
        if threads != 1:
            import warnings

            warnings.warn(f"torch.set_num_threads({threads}) ignored: a grading kernel runs PyTorch in one thread")
        set_num_threads(1)

    torch.set_num_threads = one_thread


def _proc_status(pid: int | str) -> dict[str, str]:
    """/proc/PID/status as field -> value (OSError once the process is gone)."""
    with open(f"/proc/{pid}/status") as status:
        return dict(line.split(":", 1) for line in status.read().splitlines() if ":" in line)


def confinement(pid: int | str = "self") -> dict:
    """What /proc says of process ``pid``: its seccomp mode (SECCOMP_FILTERING once
    ``forbid_new_threads_and_processes`` ran) and its number of threads; {} once it is gone."""
    try:
        fields = _proc_status(pid)
    except OSError:
        return {}
    return {"seccomp": int(fields.get("Seccomp", "0")), "threads": int(fields.get("Threads", "0"))}


def initialize_holding_threads(app) -> list[threading.Thread]:
    """Initialize ipykernel's ``app`` without starting the threads it makes: returned, in their
    order, to be started with ``threading.Thread.start``."""
    held, start = [], threading.Thread.start
    threading.Thread.start = lambda thread: held.append(thread)
    try:
        app.initialize()
    finally:
        threading.Thread.start = start
    return held


def spawn(argv: list[str], files: str, one_thread: bool = True) -> int:
    # The kernel inherits the server's non-dumpable flag: its /proc files are root's, so that neither it
    # nor the server can reset or read its memory's use. For a moment it is dumpable, while the server
    # opens those files (an open file keeps its rights); the student's code, later, cannot open them.
    dumpable, opened = os.pipe(), os.pipe()
    pid = os.fork()
    if pid:
        os.close(dumpable[1])
        os.close(opened[0])
        _exit_codes.pop(pid, None)  # an earlier process's, if the pid comes round again
        try:
            if os.read(dumpable[0], 1):
                clear = os.open(f"/proc/{pid}/clear_refs", os.O_WRONLY | os.O_CLOEXEC)
                try:
                    _memory_files[pid] = clear, os.open(f"/proc/{pid}/smaps", os.O_RDONLY | os.O_CLOEXEC)
                except OSError:
                    os.close(clear)
                    raise
        except OSError:
            pass  # this kernel's memory is not measured: "memory" answers {} for it
        finally:
            os.close(dumpable[0])
            os.close(opened[1])  # the kernel goes on either way
        return pid
    try:  # the kernel: never returns to the server's loop
        os.setsid()
        os.close(dumpable[0])
        os.close(opened[1])
        _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        os.write(dumpable[1], b"!")
        os.read(opened[0], 1)  # b"" once the server closed its end
        _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.closerange(3, 1024)  # the server's pipes and anything else it had open
        run_kernel(argv, files, one_thread)
    finally:
        os._exit(0)


def _kib(fields: dict[str, str], name: str) -> int:
    return int(fields[name].split()[0]) * 1024


def ram_disks_used() -> int:
    """Bytes the sandbox's RAM disks hold (files on them are memory, not disk)."""
    used = 0
    for folder in RAM_DISKS:
        try:
            disk = os.statvfs(folder)
        except OSError:
            continue
        used += (disk.f_blocks - disk.f_bfree) * disk.f_frsize
    return used


@functools.cache
def memory_devices() -> frozenset[bytes]:
    """The devices (as smaps writes them, "major:minor" in hex) whose files are memory: every RAM disk
    mounted here (tmpfs, ramfs), and the one of shared anonymous memory, memfd_create's files and
    SysV shared memory."""
    devices = set()
    try:
        with open("/proc/self/mountinfo") as table:  # "id parent major:minor root point ... - fstype ..."
            for row in table:
                fields, _, tail = row.partition(" - ")
                if tail.split()[:1] in (["tmpfs"], ["ramfs"]):
                    devices.add(tuple(map(int, fields.split()[2].split(":"))))
        shared = os.memfd_create("device", os.MFD_CLOEXEC)
        device = os.fstat(shared).st_dev
        os.close(shared)
        devices.add((os.major(device), os.minor(device)))
    except (OSError, AttributeError, ValueError):
        pass
    return frozenset(f"{major:02x}:{minor:02x}".encode() for major, minor in devices)


def _touched(smaps: int) -> int:
    """Bytes of the pages marked used in the mappings of ``smaps`` (an open /proc/PID/smaps) that are
    memory: anonymous (no file: inode 0), or a file on one of ``memory_devices``."""
    text = b""
    while chunk := os.pread(smaps, 1 << 20, len(text)):
        text += chunk
    devices, touched = memory_devices(), 0
    mappings = list(MAPPING.finditer(text))
    for mapping, after in zip(mappings, mappings[1:] + [None]):
        if mapping.group(2) == b"0" or mapping.group(1) in devices:
            block = text[mapping.end():after.start() if after else len(text)]
            used = re.search(rb"^Referenced:\s+(\d+) kB", block, re.M)
            touched += int(used.group(1)) * 1024 if used else 0
    return touched


def memory(pid: int, reset: bool) -> dict:
    """The kernel's resident memory, its peak and what it holds of each kind (bytes), what the RAM
    disks hold, and its memory marked used (``_touched``) unless ``reset``, which first marks every
    page unused and makes the peak what it holds now; {} once it is gone or its memory is not
    measured."""
    if pid not in _memory_files:
        return {}
    clear, smaps = _memory_files[pid]
    try:
        if reset:
            os.write(clear, CLEAR_REFS_USED)
            os.write(clear, CLEAR_REFS_PEAK)
        fields = _proc_status(pid)
        measured = {"resident": _kib(fields, "VmRSS"), "peak": _kib(fields, "VmHWM"), "anon": _kib(fields, "RssAnon"),
                    "shmem": _kib(fields, "RssShmem"), "file": _kib(fields, "RssFile"), "ram_disks": ram_disks_used()}
        return measured if reset else {**measured, "touched": _touched(smaps)}
    except (OSError, KeyError, ValueError):
        return {}


def _forget(pid: int) -> None:
    for fd in _memory_files.pop(pid, ()):
        os.close(fd)


def run_kernel(argv: list[str], files: str, one_thread: bool = True) -> None:
    """Become a kernel with ipykernel's ``argv``, working in KERNEL_FOLDER with a copy of
    ``files``, with keyrings of its own (the session keyring is inherited, from the server or
    from the grader for a cold kernel, and writable by whoever holds it; the user's keyrings
    are shared by every process of the user), and confined to its RAM disks once its sockets
    are bound in the scratch folder: no thread of the kernel, no process it starts, can write
    there or anywhere else outside the sandbox's sized RAM disks. With ``one_thread`` (always, but
    in the tests of the layers below it), no cell can start a thread or a process."""
    _libc.mallopt(M_MMAP_THRESHOLD, OWN_MAPPING_BYTES)  # what it holds is what it uses (the long case)
    shutil.copytree(files, KERNEL_FOLDER, dirs_exist_ok=True)
    os.chdir(KERNEL_FOLDER)
    os.environ["HOME"] = KERNEL_FOLDER
    _keyctl(KEYCTL_JOIN_SESSION_KEYRING, 0)  # a new, anonymous session keyring
    _clear_user_keyrings()
    sys.argv = ["ipykernel_launcher", *argv]
    from ipykernel.heartbeat import Heartbeat
    from ipykernel.kernelapp import IPKernelApp

    # Landlock confines the thread that asks and the threads it starts later, not those running:
    # ipykernel's threads start once this one is confined, but the heartbeat's, which binds its
    # socket itself and then confines itself.
    bind, bound = Heartbeat._bind_socket, threading.Event()

    def bind_then_confine(heartbeat: Heartbeat) -> None:
        try:
            bind(heartbeat)
        finally:
            confine_writes()
            bound.set()

    Heartbeat._bind_socket = bind_then_confine
    app = IPKernelApp.instance()
    threads = initialize_holding_threads(app)
    for thread in [t for t in threads if isinstance(t, Heartbeat)]:
        threading.Thread.start(thread)
        bound.wait(30)  # a heartbeat that failed even to try to bind: the grader sees the kernel fail to start
    confine_writes()
    for thread in [t for t in threads if not isinstance(t, Heartbeat)]:
        threading.Thread.start(thread)
    if one_thread:
        keep_pytorch_in_one_thread()
        # pyzmq sends a large message (a print or a figure past 64 KiB) without a copy, and frees it
        # in a thread of its own, started at the first one: started now, while it can be
        from zmq.utils.garbage import gc as zmq_garbage_collector

        zmq_garbage_collector.start()
        # ipykernel's threads all run (PyTorch, OpenMP and OpenBLAS have one: OMP_NUM_THREADS), and no
        # cell has run yet: from here on, the student's code runs in this one thread of this one process
        forbid_new_threads_and_processes()
    app.start()


def _keyctl(*args: int) -> int:
    if SYS_KEYCTL is None:
        return -1
    return _libc.syscall(SYS_KEYCTL, *map(ctypes.c_long, args))


def _clear_user_keyrings() -> None:
    """Empty the keyrings every process of this user can reach (the user's, the user session's
    and the persistent one), where a kernel could leave keys for the next."""
    persistent = _keyctl(KEYCTL_GET_PERSISTENT, -1, KEY_SPEC_PROCESS_KEYRING)  # -1 where unsupported
    for keyring in (KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING, persistent):
        if keyring != -1:
            _keyctl(KEYCTL_CLEAR, keyring)


def kill(pid: int) -> None:
    """The kernel and the processes it started in its session; returns once the kernel is
    gone (the grader polls right after, and would otherwise sleep a tenth of a second)."""
    for send in (os.killpg, os.kill):
        try:
            send(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        _exit_codes[pid] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    except ChildProcessError:  # reaped before
        pass
    _forget(pid)


def poll(pid: int) -> int | None:
    if pid in _exit_codes:
        return _exit_codes.pop(pid)
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # reaped before
        _forget(pid)
        return -signal.SIGKILL
    if not done:
        return None
    _forget(pid)
    return os.waitstatus_to_exitcode(status)


_modes: dict[str, int] = {}  # the writable folders' modes when the server started, given back at each reset


def reset(scratch: str, scratch_link: str) -> tuple[int, bool]:
    """Kill every process of the sandbox but this one and its init, and empty every place a
    kernel could write to, so nothing of one student is left for the next. ``scratch_link``
    (the scratch folder's path on the host) leads to ``scratch`` again."""
    killed = 0
    _exit_codes.clear()
    for pid in list(_memory_files):
        _forget(pid)
    for _ in range(1000):
        others = _other_processes()
        if not others:
            break
        killed += len(others)
        try:
            os.kill(-1, signal.SIGKILL)  # all but this process and the namespace's init
        except ProcessLookupError:
            pass
        _reap()
        time.sleep(0.001)
    clean = True
    # a Python bound into /tmp (a clone of the course there) stays where it is, and so does the
    # scratch folder's link, made again if a kernel changed it (where it lies in /tmp)
    keep = _mount_points() | {scratch_link}
    for folder in ("/tmp", "/dev/shm", "/dev/mqueue", scratch):  # files, POSIX shared memory and queues
        clean = empty(folder, _modes.get(folder), keep=keep) and clean
    relink(scratch, scratch_link)
    _remove_sysv_ipc()
    _clear_user_keyrings()
    return killed, clean


def _other_processes() -> list[int]:
    """The sandbox's processes but its init and this server."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())]


def _reap() -> None:
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def empty(folder: str, mode: int | None = None, keep: frozenset[str] = frozenset()) -> bool:
    """Remove everything in ``folder``, whatever a kernel did to it, but the mount points in
    ``keep`` and the folders on the way to them; True if nothing else is left.

    A kernel can leave folders that a plain rmtree by the same user cannot remove: read-only
    (``chmod 500``: nothing in them can be unlinked) or closed (``chmod 0``: they cannot even
    be listed). Their owner, the user the server runs as, can always open them again: each
    folder is made the owner's to read, write and enter before its content goes. ``folder``
    itself gets ``mode`` back (a kernel could have closed /tmp to the next one). Anything left
    (a tree too deep for its paths, say) is reported, and the grader then starts a new sandbox.
    The paths in ``keep`` stay (mount points, which cannot go: the Python's folder, bound into the
    sandbox's /tmp where the course lies there), and so do the folders that lead to them, each
    emptied of everything else."""
    _open_up(folder)
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return not os.path.lexists(folder)
    clean = True
    for entry in entries:
        if entry.path in keep:
            continue
        if _leads_to(entry.path, keep):
            clean = empty(entry.path, keep=keep) and clean
        elif entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            try:
                os.unlink(entry.path)
            except OSError:
                pass
    if mode is not None:
        try:
            os.chmod(folder, mode)
        except OSError:
            pass
    try:
        left = [path for path in (os.path.join(folder, name) for name in os.listdir(folder))
                if path not in keep and not _leads_to(path, keep)]
    except OSError:
        return False
    return clean and not left


def _leads_to(folder: str, points: frozenset[str]) -> bool:
    """Whether one of ``points`` lies below ``folder``."""
    return any(point.startswith(folder + "/") for point in points)


def _mount_points() -> frozenset[str]:
    """Every mount point of this process's mount namespace (/proc/self/mountinfo's fifth field,
    whose spaces and other odd bytes are octal escapes)."""
    try:
        with open("/proc/self/mountinfo", "rb") as table:
            rows = table.read().splitlines()
    except OSError:
        return frozenset()
    unescape = lambda field: re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), field)  # noqa: E731
    return frozenset(os.fsdecode(unescape(row.split()[4])) for row in rows if len(row.split()) > 4)


def _open_up(top: str) -> None:
    """Make every folder under ``top`` readable, writable and searchable by its owner (top down:
    a closed folder is opened before it is listed)."""
    folders = [top]
    while folders:
        folder = folders.pop()
        try:
            os.chmod(folder, stat.S_IRWXU)  # a folder (scandir, not following links): nothing runs to swap it
            folders += [e.path for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)]
        except OSError:
            pass


def remove(path: str) -> None:
    """Remove ``path`` and everything in it, whatever modes a kernel gave its folders."""
    if os.path.lexists(path):
        empty(path)
        shutil.rmtree(path, ignore_errors=True)


def _remove_sysv_ipc() -> None:
    """Shared memory, semaphores and message queues outlive their process: remove them."""
    removers = {"shm": lambda i: _libc.shmctl(i, IPC_RMID, None), "sem": lambda i: _libc.semctl(i, 0, IPC_RMID),
                "msg": lambda i: _libc.msgctl(i, IPC_RMID, None)}
    for kind, remove in removers.items():
        try:
            with open(f"/proc/sysvipc/{kind}") as table:
                rows = table.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            remove(int(row.split()[1]))


def relink(target: str, link: str) -> None:
    """Make ``link`` a link to ``target`` again, whatever is at its place."""
    if os.path.islink(link):
        if os.readlink(link) == target:
            return
        os.unlink(link)
    else:
        remove(link)
    os.makedirs(os.path.dirname(link), exist_ok=True)
    os.symlink(target, link)


def serve(scratch_link: str, font_lists: list[str]) -> None:
    scratch = os.path.realpath(scratch_link)  # where the sandbox mounts it
    _keyctl(KEYCTL_JOIN_SESSION_KEYRING, 0)  # not the grader's: its kernels could write there
    _clear_user_keyrings()
    for font_list in font_lists:  # the grader's matplotlib cache: read, not made again, by the preload
        shutil.copy(font_list, os.environ.get("MPLCONFIGDIR", "/tmp"))
    preload()
    for folder in ("/tmp", "/dev/shm", "/dev/mqueue", scratch):
        try:
            _modes[folder] = stat.S_IMODE(os.stat(folder).st_mode)
        except OSError:
            pass
    reply = sys.stdout
    threads = threading.active_count()
    reply.write(json.dumps({"ready": threads == 1, "threads": threads}) + "\n")
    reply.flush()
    for line in sys.stdin:
        request = json.loads(line)
        op = request["op"]
        if op == "spawn":
            answer = {"pid": spawn(request["argv"], request["files"], request.get("one_thread", True))}
        elif op == "poll":
            answer = {"exit": poll(request["pid"])}
        elif op == "inspect":
            answer = {**confinement(request["pid"]), "processes": len(_other_processes())}
        elif op == "memory":
            answer = memory(request["pid"], request.get("reset", False))
        elif op == "kill":
            kill(request["pid"])
            answer = {}
        elif op == "reset":
            killed, clean = reset(scratch, scratch_link)
            answer = {"killed": killed, "clean": clean}
        else:
            answer = {"error": f"unknown op {op!r}"}
        reply.write(json.dumps(answer) + "\n")
        reply.flush()


if __name__ == "__main__":
    if sys.argv[1] in ("--kernel", "--kernel-with-threads"):
        run_kernel(sys.argv[3:], sys.argv[2], one_thread=sys.argv[1] == "--kernel")
    else:
        serve(sys.argv[1], sys.argv[2:])
