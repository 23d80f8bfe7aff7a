"""Run each grading kernel in a sandbox: bubblewrap's namespaces plus prlimit's limits.

Inside the sandbox a kernel has no network, a read-only view of the system and of
Python (the interpreter, the virtual environment and the check helpers: nothing else of
the repository, so no solutions/, no gradebook, no other student's files), a private
/tmp, /dev/shm and message queues, a read-only /dev, and one writable folder of its own.
It never runs as root: a grader started as root gives each sandbox an unprivileged uid
of its own, so the process limit holds. It talks to nbclient over IPC sockets in a
private folder, since TCP cannot cross into its network namespace. The kernel managers here
name how their kernel starts; the kernel provisioners of provisioners.py start it.

The notebook's total wall-clock time and the size of its outputs are capped by
``SandboxedExecute``, the nbgrader Execute preprocessor the autograder uses; it also
keeps the code of hidden tests out of everything the kernel shows.
"""
from __future__ import annotations

import math
import time
from queue import Empty

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.output_widget import OutputWidget
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute
from traitlets import Bool, Integer, Type, Unicode

from attention_checks.localise import LOCALISE_VARIABLE
from attention_checks.record import MIME

from autograder.cells import holds_hidden_tests, is_test_cell, measures_memory
from autograder.results import MEMORY, OBSERVED, OUTPUT_CUT, executor_error
from autograder.sandbox.bwrap import FILE_BYTES, PROCESSES, sandbox_limits
from autograder.sandbox.forkserver import SECCOMP_FILTERING
from autograder.sandbox.provisioners import SandboxProvisioner
from autograder.sandbox.registration import PRIVATE_IPC, SANDBOX

# Run silently in the kernel right before a test cell of a memory bound is measured: the garbage of
# earlier cells (reference cycles) is collected, and what the allocator holds free given back, now
# rather than during the cell, where freeing it would be charged to the cell as memory given back.
FRESH_STATE = '__import__("gc").collect(); __import__("ctypes").CDLL(None).malloc_trim(0)'
AFTER_HIDDEN_TESTS = ("[output not shown: this cell ran after hidden tests had run, and output from then on could "
                      "show their code]\n")


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
            if not await self.is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
        raise RuntimeError(f"Kernel didn't respond in {timeout} seconds")


class PrivateIPCKernelManager(AsyncKernelManager):
    """jupyter_client's kernel manager, its kernel started by ``provisioner_name`` (a kernel
    provisioner of autograder/sandbox/provisioners.py, whatever the kernel spec says): by
    default over Unix sockets in a folder of its own instead of TCP ports, which kernels
    started at the same time (``--jobs 14``) can race for. The grader's kernels never do."""

    provisioner_name = PRIVATE_IPC

    @property
    def kernel_spec(self):
        spec = super().kernel_spec
        if spec is not None:  # jupyter_client's own way to name the provisioner: the spec's metadata
            spec.metadata["kernel_provisioner"] = {"provisioner_name": self.provisioner_name}
        return spec


class SandboxedKernelManager(PrivateIPCKernelManager):
    """A kernel manager whose kernel runs inside the sandbox (provisioners.SandboxProvisioner):
    its settings and limits, and what the kernel's fork server sees of it from outside."""

    provisioner_name = SANDBOX

    memory_limit = Integer(4 * 1024**3, help="address-space limit of the kernel in bytes (0: none)").tag(config=True)
    file_size_limit = Integer(FILE_BYTES, help="largest file the kernel may write, in bytes").tag(config=True)
    # RLIMIT_NPROC counts the processes of the sandbox's user (a uid of its own, or a user namespace).
    process_limit = Integer(PROCESSES, help="processes and threads a sandbox may run").tag(config=True)
    work_root = Unicode("", help="where cold kernels' work folders go (default: the system temp dir)").tag(config=True)
    warm = Bool(True, help="fork kernels from a warm fork server instead of starting each cold").tag(config=True)
    # Off only in the tests of the sandbox's other limits (processes, clean-up), which need a kernel that forks
    one_thread = Bool(True, help="the kernel's cells can start no thread nor process (a seccomp filter)").tag(
        config=True)
    client_factory = Type(SandboxedKernelClient)

    @property
    def kernel_spec(self):
        spec = super().kernel_spec
        if spec is not None:  # signals cannot reach the kernel through bwrap: interrupt it with a message
            spec.interrupt_mode = "message"
        return spec

    def limits(self) -> dict:
        return sandbox_limits(self.memory_limit, self.file_size_limit, self.process_limit)

    def _sandbox(self) -> SandboxProvisioner | None:
        return self.provisioner if isinstance(self.provisioner, SandboxProvisioner) else None

    def confinement(self) -> dict:
        """The kernel as its fork server sees it from outside: its seccomp mode (``seccomp``,
        forkserver.SECCOMP_FILTERING once no thread or process can be started), its threads, and
        the sandbox's other processes (``processes``, the kernel included). {} for a cold kernel,
        or one whose server is gone."""
        sandbox = self._sandbox()
        return sandbox.ask_server("inspect") if sandbox else {}

    def memory(self, reset: bool = False) -> dict:
        """The kernel's memory as its fork server reads it from outside (forkserver.memory, bytes:
        ``resident``, its ``peak`` since the last reset, ``anon``, ``shmem``, ``file``, the RAM disks'
        ``ram_disks``, and but at a reset the memory it read or wrote since then, ``touched``) and,
        where the sandbox has a memory group, what the group holds (``group_held``, at a reset) or
        held at most since the last reset (``group_peak``); ``reset`` starts a new measure first.
        {} for a cold kernel, or one whose server is gone."""
        sandbox = self._sandbox()
        measured = sandbox.ask_server("memory", reset=reset) if sandbox else {}
        group = sandbox.memory_group[0] if measured and sandbox.memory_group else None
        if group is not None:
            held = group.start_peak() if reset else group.peak()
            if held is not None:
                measured["group_held" if reset else "group_peak"] = held
        return measured

    def oom_kills(self) -> int:
        """Processes of this kernel's sandbox the OOM killer stopped since the kernel started:
        its processes together held more than ``memory_limit``."""
        sandbox = self._sandbox()
        return sandbox.oom_kills() if sandbox else 0


def used_between(start: dict, end: dict) -> int:
    """The memory (bytes) a kernel used between two measures of ``SandboxedKernelManager.memory``
    (``start`` taken with a reset): the most new memory it held at once, or, if more, the memory it
    held before and read or wrote, counting what it gave back as used (a buffer made before the
    test, written, and freed before its end).

    New memory, in any form: the sandbox's memory group's peak over what it held at the start,
    where it has one (every page charged to it: the kernel's own, its files on the RAM disks, shared
    memory); and, group or not, the kernel's peak resident memory over its start, less the pages of
    files (its libraries' code) it mapped for the first time, which are not its to hold, plus what
    its RAM disks gained. Held before: its memory read or written (``touched``: anonymous, shared,
    on a RAM disk), less what is new (its anonymous and shared memory grew by as much)."""
    def gained(name: str) -> int:
        return end[name] - start[name]

    new = end["peak"] - start["resident"] - max(0, gained("file")) + max(0, gained("ram_disks"))
    if "group_held" in start and "group_peak" in end:
        new = max(new, end["group_peak"] - start["group_held"])
    own = gained("anon") + gained("shmem")  # grown (new pages) or shrunk (given back)
    held_before = end["touched"] - max(0, own) + max(0, -own)
    return max(new, held_before, 0)


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
    localise = Unicode("", help="graded names, comma-separated, whose ladders the kernel runs (attention_checks."
                       "localise): the grader's second run of a notebook whose mistakes were not localised").tag(
        config=True)

    def __init__(self, **kwargs):
        # nbgrader's Execute would make it jupyter_client's, whose kernels race for TCP ports;
        # the sandbox's configuration still replaces it by SandboxedKernelManager
        kwargs.setdefault("kernel_manager_class", PrivateIPCKernelManager)
        super().__init__(**kwargs)

    def preprocess(self, nb, resources=None, km=None):
        for cell in nb.cells:  # only what this run observes is noted (RebuildFromSource leaves none)
            cell.get("metadata", {}).pop(OBSERVED, None)
            cell.get("metadata", {}).pop(MEMORY, None)
        self._deadline = time.monotonic() + self.notebook_timeout
        self._cell_bytes, self._record_bytes, self._stopped = {}, 0, False
        self._notebook_bytes, self._notebook_cut = 0, False
        self._after_hidden, self._interrupted, self._oom_kills_seen = False, False, 0
        self._at_start: dict | None = None  # the kernel's confinement before its first cell
        self._asked_for_ladders = not self.localise
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
        if self._at_start is None:
            self._at_start = self.km.confinement() if hasattr(self.km, "confinement") else {}
        try:
            if not self._asked_for_ladders:
                self._ask_for_ladders(cell)
            start = self._start_measure(cell) if measures_memory(cell) else {}
            self._check_assign_resources(resources)
            cell = self.execute_cell(cell, index, store_history=not test)
            self._note_memory(cell, start)
            if self._spawned():  # whatever else happened: no later cell runs
                self._stopped = True
                self._observe(cell, "spawned")
            elif self._interrupted:  # interrupted at its timeout: the kernel answered, but the cell ran out of time
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

    def _ask_for_ladders(self, cell) -> None:
        """Tell the kernel, before the notebook's first cell, which names' ladders to run, the way
        attention_checks.localise reads it (a variable of its environment). The student's code can
        read it too: it learns only that the grader runs the notebook a second time, whose scores
        count only where they are the first run's (``engine.runner``)."""
        self._asked_for_ladders = True
        told = f"__import__('os').environ[{LOCALISE_VARIABLE!r}] = {self.localise!r}"
        self.wait_for_reply(self.kc.execute(told, silent=True, store_history=False), cell)

    def _memory(self, reset: bool = False) -> dict:
        return self.km.memory(reset) if hasattr(self.km, "memory") else {}

    def _start_measure(self, cell) -> dict:
        """The kernel's memory right before ``cell`` runs, in a fresh state (FRESH_STATE), its measure
        reset; {} where it is not measured (no fork server)."""
        if not self._memory(reset=True):  # (a reset answers without reading the kernel's mappings)
            return {}
        self.wait_for_reply(self.kc.execute(FRESH_STATE, silent=True, store_history=False), cell)
        return self._memory(reset=True)

    def _note_memory(self, cell, start: dict) -> None:
        """Note in a test cell's metadata how much memory the kernel used while the cell ran, read
        from outside (what the checks of a streaming algorithm are judged on; no note where it was
        not measured): ``used_between`` its measures before and after the cell."""
        end = self._memory() if start else {}
        if end:
            cell.metadata[MEMORY] = {"used": used_between(start, end)}

    def _spawned(self) -> bool:
        """Whether the kernel runs more threads, or its sandbox more processes, than before the
        notebook's first cell, as its fork server reads them from outside. A kernel under its
        seccomp filter (forkserver.forbid_new_threads_and_processes) cannot start any: it is read
        once. Where Linux refused the filter, it is read after every cell (a thread that ended
        within its cell goes unseen)."""
        start = self._at_start
        if not start or start.get("seccomp") == SECCOMP_FILTERING:
            return False
        now = self.km.confinement()
        return bool(now) and (now["threads"] > start["threads"] or now["processes"] > start["processes"])

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

