"""One memory limit for every process of a sandbox: a memory control group of its own.

The address-space limit (prlimit) is per process, so a kernel that forks can hold several
times it. A control group counts the memory of all its processes together, and the pages of
the RAM disks they write (/tmp, /dev/shm): past the limit, the kernel's OOM killer stops a
process of that group and of no other. A grader may create groups below its own when it is
root (CI, containers) with cgroup v1, or, with cgroup v2, when its own group hands the memory
controller down to its children; otherwise ``MemoryGroup.create`` returns None and the
per-process limit is all there is.

Both hierarchies are read the same way: cgroup v1's memory controller
(``memory.limit_in_bytes``) and cgroup v2 (``memory.max``), each found from
/proc/self/cgroup and /proc/self/mountinfo. A group also measures the most memory its sandbox
held at once since a reset (``start_peak``, ``peak``), in every form: what flash_attention's
long case is judged on, with the kernel's own measures (kernels.used_between).
"""
from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class _Hierarchy:
    """Where a hierarchy keeps this process's group, and the names of the files that matter."""
    own_group: Path
    limit_files: tuple[str, ...]  # memory, then memory plus swap (v1) or swap alone (v2)
    events_file: str  # holds a line "oom_kill N"
    usage_files: tuple[str, str]  # what the group holds now, and the most it held at once
    v2: bool


def _mounts() -> dict[str, tuple[str, Path]]:
    """The cgroup hierarchies: "memory" (v1's controller) and "v2", each as (the group the
    mount shows, where it is mounted)."""
    mounts = {}
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return mounts
    for line in lines:
        fields, _, tail = line.partition(" - ")
        fstype, _, options = (tail.split() + ["", "", ""])[:3]
        root, mount_point = fields.split()[3:5]
        if fstype == "cgroup" and "memory" in options.split(","):
            mounts["memory"] = (root, Path(mount_point))
        elif fstype == "cgroup2":
            mounts.setdefault("v2", (root, Path(mount_point)))
    return mounts


def _folder(mount: tuple[str, Path], group: str) -> Path:
    """The folder of ``group`` (a path from /proc/self/cgroup) in a mount that shows ``root``."""
    root, mount_point = mount
    relative = os.path.relpath(group, root) if group.startswith(root) else group.lstrip("/")
    return mount_point if relative == "." else mount_point / relative


def _hierarchy() -> _Hierarchy | None:
    """The memory hierarchy this process can make groups in, if any."""
    mounts, groups = _mounts(), {}
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            groups[controllers] = path
    except (OSError, ValueError):
        return None
    v1 = next((path for controllers, path in groups.items() if "memory" in controllers.split(",")), None)
    if v1 is not None and "memory" in mounts:
        return _Hierarchy(_folder(mounts["memory"], v1), ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"),
                          "memory.oom_control", ("memory.usage_in_bytes", "memory.max_usage_in_bytes"), v2=False)
    if "" in groups and "v2" in mounts:
        # v2 lets a group with processes in it (this one) give no controller to its children: only
        # where the memory controller was already handed down (a delegated group) can it be used
        own = _folder(mounts["v2"], groups[""])
        try:
            if "memory" not in (own / "cgroup.subtree_control").read_text().split():
                return None
        except OSError:
            return None
        return _Hierarchy(own, ("memory.max", "memory.swap.max"), "memory.events", ("memory.current", "memory.peak"),
                          v2=True)
    return None


def memory_groups_available() -> bool:
    """Whether this process can make a sandbox's memory group (it makes one and removes it)."""
    group = MemoryGroup.create(2**30)
    if group is not None:
        group.remove()
    return group is not None


class MemoryGroup:
    """A memory control group for one sandbox, limited to ``limit_bytes`` in all."""

    def __init__(self, path: Path, hierarchy: _Hierarchy, limit_bytes: int):
        self.path, self.hierarchy, self.limit_bytes = path, hierarchy, limit_bytes
        self._oom_kills = 0  # the last count read: the group may be gone when someone asks
        self._peak: int | None = None  # cgroup v2's memory.peak, open: its reset holds for this descriptor

    @classmethod
    def create(cls, limit_bytes: int) -> MemoryGroup | None:
        """A new group below this process's own, or None where none can be made."""
        hierarchy = _hierarchy()
        if hierarchy is None or not limit_bytes:
            return None
        path = hierarchy.own_group / f"autograder-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            path.mkdir()
        except OSError:
            return None
        group = cls(path, hierarchy, limit_bytes)
        memory, with_swap = hierarchy.limit_files
        try:
            (path / memory).write_text(str(limit_bytes))
            if (path / with_swap).exists():  # no swapping past the limit either
                (path / with_swap).write_text(str(0 if hierarchy.v2 else limit_bytes))
        except OSError:
            group.remove()
            return None
        return group

    def wrap(self, command: list[str]) -> list[str]:
        """``command`` started inside the group: the shell joins it, then becomes the command, so
        that every process it starts (bwrap, the kernel, the kernel's children) is counted."""
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.path / "cgroup.procs"), *command]

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer has stopped in this group so far (after
        ``remove``, as many as there were then)."""
        try:
            for line in (self.path / self.hierarchy.events_file).read_text().splitlines():
                name, _, count = line.partition(" ")
                if name == "oom_kill":
                    self._oom_kills = int(count)
        except (OSError, ValueError):
            pass
        return self._oom_kills

    def start_peak(self) -> int | None:
        """Start a new measure of the most memory the group holds at once (every page charged to it:
        its processes' own, the files they write on RAM disks, shared memory); returns what it holds
        now (bytes), or None where the peak cannot be reset (cgroup v2 before Linux 6.12)."""
        held, peak = self.hierarchy.usage_files
        try:
            if self.hierarchy.v2:
                self._close_peak()
                self._peak = os.open(self.path / peak, os.O_RDWR | os.O_CLOEXEC)
                os.write(self._peak, b"reset")
            else:
                (self.path / peak).write_text("0")  # cgroup v1: the peak becomes what it holds now
            return int((self.path / held).read_text())
        except (OSError, ValueError):
            self._close_peak()
            return None

    def peak(self) -> int | None:
        """The most memory the group held at once since ``start_peak`` (bytes), or None."""
        try:
            if not self.hierarchy.v2:
                return int((self.path / self.hierarchy.usage_files[1]).read_text())
            return int(os.pread(self._peak, 64, 0)) if self._peak is not None else None
        except (OSError, ValueError):
            return None

    def _close_peak(self) -> None:
        if self._peak is not None:
            os.close(self._peak)
            self._peak = None

    def remove(self, timeout: float = 5.0) -> None:
        """Remove the group once its processes are gone (the sandbox was stopped before)."""
        self.oom_kills()  # the last count, for a kernel whose sandbox went with it
        self._close_peak()
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:  # busy: the last processes are still exiting
                if time.monotonic() > deadline:
                    return
                time.sleep(0.02)
