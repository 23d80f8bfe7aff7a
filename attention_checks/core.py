"""What the checks share on both sides: dtypes and tolerances, case seeds and random inputs,
the description of a case, what nbgrader reads from a test cell (CheckFailed, PartialCredit),
and running student code quietly under ForbiddenCalls.

The declared checks are in ``registry``; the kernel's side of a check in ``probe``, the
judging side in ``answers.judging``.
"""

from __future__ import annotations

import contextlib
import importlib._bootstrap
import io
import logging
import os
import sys
import threading
import traceback
import warnings
import zlib
from types import CodeType, FrameType, FunctionType
from typing import Any, Callable, Mapping, Sequence

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.overrides import TorchFunctionMode


# --------------------------------------------------------------------------
# devices, dtypes, tolerances

DTYPES = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
}

# Tolerances by the dtype of the *inputs*; a value passes when
# |got - expected| <= atol + rtol * |expected| (torch.allclose).
# float32 must hold on a GPU that runs matmuls in TF32 (inputs rounded to a
# 10-bit mantissa) or fused kernels: emulating TF32 on the 03-qkv cases gives
# errors up to 2e-3 for scores of order 1 (tests/test_check_machinery.py and
# tests/test_checks_self_attention.py run that emulation). float64 is tight, so
# that computing in float32 inside fails.
TOLERANCES = {
    torch.float16: dict(rtol=1e-2, atol=1e-2),
    torch.bfloat16: dict(rtol=3e-2, atol=3e-2),
    torch.float32: dict(rtol=5e-3, atol=5e-3),
    torch.float64: dict(rtol=1e-9, atol=1e-11),
}

# Stands for the device in a case's description, which the report fills in: where the
# student's code ran, which under the autograder is not where the grader judges it.
DEVICE = "<device>"

# Share of a case's credit for an output of the right shape, dtype and device;
# the rest is for the right values.
STRUCTURE_SHARE = 0.25


def pick_device() -> torch.device:
    """Where the student's code runs: the GPU when there is one. (The grader judges recorded
    outcomes on the CPU: same numbers on every machine.)"""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def as_dtype(dtype: str | torch.dtype) -> torch.dtype:
    return DTYPES[dtype] if isinstance(dtype, str) else dtype


def tolerance(dtype: torch.dtype) -> dict:
    return TOLERANCES.get(dtype, TOLERANCES[torch.float32])


def with_defaults(spec: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """A case dict completed with its check's defaults; unknown keys are an error."""
    unknown = set(spec) - set(defaults) - {"seed"}
    if unknown:  # an instructor's typo, not a student's mistake
        raise ValueError(f"unknown case keys {sorted(unknown)}; allowed: {sorted(defaults)} and seed")
    return {**defaults, **spec}


# A case key: the seed of the random numbers a check's call lets the student's code draw (0 unless a
# localising rung draws them anew, to see whether the code draws any: localise.Axes.reseeded). It
# changes no input.
RESEED = "draw_seed"


def case_seed(spec: Mapping[str, Any], salt: str = "") -> int:
    """The case's own seed, or one derived from its content (stable across runs and machines;
    RESEED aside, which changes no input)."""
    if spec.get("seed") is not None:
        return int(spec["seed"])
    text = salt + repr(sorted((str(k), repr(v)) for k, v in spec.items() if k != RESEED))
    return zlib.crc32(text.encode())


def generator(seed: int) -> torch.Generator:
    # a private CPU generator: same inputs on every device, global RNG untouched
    return torch.Generator(device="cpu").manual_seed(seed)


def randn(*shape: int, gen: torch.Generator, dtype: torch.dtype, std: float = 1.0, mean: float = 0.0) -> torch.Tensor:
    # drawn in float64 so that a case gives the same numbers in every dtype
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * std + mean).to(dtype)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def describe(named: Mapping[str, Any], like: torch.Tensor | None = None, with_dtype: Sequence[str] = ()) -> str:
    """'query (2, 5, 8), attn_mask bool (5, 5), is_causal=True; float32 on cpu'.
    A tensor's dtype is shown when it differs from like's, or when its name is in with_dtype."""
    parts = []
    for name, value in named.items():
        if isinstance(value, torch.Tensor):
            same = like is not None and value.dtype == like.dtype and name not in with_dtype
            kind = "" if same else f" {_dtype_name(value.dtype)}"
            parts.append(f"{name}{kind} {tuple(value.shape)}")
        else:
            parts.append(f"{name}={value!r}")
    where = f"; {_dtype_name(like.dtype)} on {DEVICE}" if like is not None else ""  # filled in by the report
    return ", ".join(parts) + where


# --------------------------------------------------------------------------
# running student code


class CheckFailed(AssertionError):
    """A check that earns no points; its message is the report."""

    def _render_traceback_(self) -> list[str]:
        # IPython shows this instead of a traceback: the report alone, without
        # the helper's frames or the test cell's source (hidden tests stay hidden).
        return f"\x1b[0;31m{type(self).__name__}\x1b[0m: {self}".splitlines()


class NotStreamed(RuntimeError):
    """online_softmax reduced over more than one block at once."""


class NotBlockwise(RuntimeError):
    """flash_attention made a tensor bigger than a tile of scores, its inputs and its output."""


class PartialCredit(float):
    """A test cell's partial score. Its repr is the bare number: nbgrader reads the
    text/plain of a test cell's result as the points it earns."""

    def __new__(cls, score: float, points: float):
        obj = super().__new__(cls, score)
        obj.points = points
        return obj

    def __repr__(self) -> str:
        return repr(float(self))

    def _repr_html_(self) -> str:
        return f"<b>Partial credit: {float(self):g} / {self.points:g} points</b> (see the report above)"


# PyTorch's own Python implementations of its public operators (reference implementations,
# decompositions, primitives): reached from a student's code, they compute what the student was
# asked to write out of operations no check forbids. Forbidden in every graded object, by any name.
PRIVATE_NAMESPACES = ("_refs", "_decomp", "_prims", "_prims_common")
PRIVATE_IMPLEMENTATIONS = "PyTorch's private implementations (torch._refs, torch._decomp, torch._prims)"
# The watch of the code that runs is a profiler hook: graded code that switches it off hides that code.
WATCH_SWITCHED_OFF = "sys.setprofile (graded code may not switch off the check's watch of what it runs)"
# The checks' other watches are PyTorch modes (ForbiddenCalls, a TorchFunctionMode; 09's Footprint, a
# TorchDispatchMode): graded code that switches them off or pops them hides what it computes from them.
# The grader reads it from the source, outside the kernel (a watch cannot tell it was switched off).
MODES_SWITCHED_OFF = "PyTorch's mode stack switched off or popped (graded code may not hide from the checks' modes)"
MODE_SWITCHES = ("_disable_current_modes", "_pop_mode", "_pop_mode_temporarily", "_pop_torch_dispatch_stack",
                 "_pop_torch_function_stack", "_unset_dispatch_mode", "_set_dispatch_mode", "_set_torch_function_mode",
                 "DisableTorchFunction", "DisableTorchFunctionSubclass", "_DisableTorchDispatch",
                 "_ExcludeDispatchKeyGuard")
# What every check forbids, beside its own: name shown -> the identifiers the source scan looks for
ALWAYS_FORBIDDEN = {PRIVATE_IMPLEMENTATIONS: PRIVATE_NAMESPACES, WATCH_SWITCHED_OFF: ("setprofile",),
                    MODES_SWITCHED_OFF: MODE_SWITCHES}
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_PRIVATE_DIRS = tuple(f"{_TORCH_DIR}{namespace}{os.sep}" for namespace in PRIVATE_NAMESPACES)
# The import system runs a module's top-level code through this function (the code object is
# the import system's own: graded code can call the function, but not make another run this code)
_RUNS_MODULE_CODE = importlib._bootstrap._call_with_frames_removed.__code__


_IS_META = torch._C.TensorBase.is_meta.__get__  # PyTorch's own answer, whatever a subclass says


def _shapes_only(frame: FrameType, caller: FrameType) -> bool:
    """Whether the frames from ``frame`` up to ``caller`` (not included) hold tensors, and only
    meta or fake ones (shapes, no data), in their variables or the lists, tuples and dicts there.
    Types are the objects' own (an object can claim any class, a subclass any ``is_meta``)."""
    tensors = []
    while frame is not None and frame is not caller:
        for value in frame.f_locals.values():
            inside = value.values() if type(value) is dict else value if type(value) in (list, tuple) else (value,)
            tensors += [t for t in inside if issubclass(type(t), torch.Tensor)]
        frame = frame.f_back
    return bool(tensors) and all(type(t) is FakeTensor or _IS_META(t) for t in tensors)


def _handed(code: CodeType, frame: FrameType, top: FrameType) -> bool:
    """Whether a function of ``code`` is among the variables (closures included), or in the lists,
    tuples and ``functools.partial`` objects there, of the frames from ``frame`` up to ``top``:
    PyTorch's Python was given it to call, rather than calling its own."""
    while frame is not None:
        for value in frame.f_locals.values():
            for item in value if type(value) in (list, tuple) else (value,):
                function = getattr(item, "func", item)  # a functools.partial's
                if getattr(getattr(function, "__func__", function), "__code__", None) is code:
                    return True
        if frame is top:
            return False
        frame = frame.f_back
    return False


def _own_code(cls: type) -> list[CodeType]:
    """The code of the functions a class defines itself (methods, static and class methods,
    properties), not those it inherits."""
    found = []
    for value in vars(cls).values():
        for function in (getattr(value, "__func__", value), getattr(value, "fget", None)):
            if isinstance(function, FunctionType):
                found.append(function.__code__)
    return found


class ForbiddenCalls(TorchFunctionMode):
    """Records calls of forbidden torch functions, however the student bound them
    (an alias, torch._C._nn.*, torch.ops.aten.*), and calls from outside PyTorch into its
    private implementations (PRIVATE_NAMESPACES), however they were looked up. Calls still
    run: raising would let a try/except in student code hide them.

    A forbidden class among the keys stands for its own methods: a call of any of them is a
    use of the class, whatever object it runs on.

    ``watch_code`` (private implementations, classes' methods) is switched off for the
    meta-device run, whose kernels PyTorch itself implements in Python there."""

    def __init__(self, forbidden: Mapping[Any, str]):
        # key: a function, or an operator's qualified name like "aten::softmax"; value: the name shown
        super().__init__()
        # a forbidden class (nn.TransformerDecoderLayer): its own methods, wherever they run (a
        # student's class may borrow its forward by name, found in vars(nn))
        self.by_code = {code: name for cls, name in forbidden.items() if isinstance(cls, type)
                        for code in _own_code(cls)}
        self.by_id = {id(f): name for f, name in forbidden.items() if not isinstance(f, (str, type))}
        self.by_op = {f: name for f, name in forbidden.items() if isinstance(f, str)}
        self.seen: list[str] = []
        self.watch_code = True
        self._previous: tuple[Callable | None, Callable | None] = (None, None)
        self._hook: Callable | None = None

    def note(self, name: str) -> None:
        if name not in self.seen:
            self.seen.append(name)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        packet = getattr(func, "_overloadpacket", func)  # torch.ops.aten.x.default -> torch.ops.aten.x
        name = self.by_id.get(id(func)) or self.by_op.get(getattr(packet, "_qualified_op_name", None))
        if name:
            self.note(name)
        return func(*args, **(kwargs or {}))

    def _profile(self, previous: Callable | None) -> Callable:
        """The profiler hook that watches the code that runs: one function, as short as it can be,
        since it runs at every call and return (a hook set before keeps running)."""
        by_code, note = self.by_code, self.note
        # the frames whose call of a C function is running: a frame runs one instruction at a
        # time, so it has at most one such call open (a set, the cheapest thing to keep)
        open_c_calls: set[int] = set()
        c_call_opens, c_call_ends = open_c_calls.add, open_c_calls.discard

        def hook(frame: FrameType, event: str, arg: Any) -> None:
            if previous is not None:
                previous(frame, event, arg)
            if event == "c_call":
                c_call_opens(id(frame))
                return
            if event != "call":
                if event != "return":  # c_return, c_exception
                    c_call_ends(id(frame))
                return
            code = frame.f_code
            name = by_code.get(code)
            if name is None:
                # Up through PyTorch's frames that each called the next directly, the caller is the
                # student's code (a private implementation handed to a library, or to torch.vmap,
                # which calls what it is given), or a frame whose call into C came back to Python
                # here: a library of C (functools.partial) or PyTorch's dispatcher running a Python
                # kernel. PyTorch's own such kernels compute with shapes only (meta kernels, for meta
                # and fake tensors: a student may count costs on the meta device); one that computes
                # with data is one the notebook registered (torch.library), for an operator of its
                # own or a public one that PyTorch's Python then called (torch.ops, F.sigmoid).
                # (torch.vmap runs eight operators through decompositions too: not told apart.)
                if not code.co_filename.startswith(_PRIVATE_DIRS):
                    return
                below, caller = frame, frame.f_back
                while (caller is not None and caller.f_code.co_filename.startswith(_TORCH_DIR)
                       and id(caller) not in open_c_calls):
                    below, caller = caller, caller.f_back
                if caller is None or id(caller) in open_c_calls and (
                        # private code running private code through C (a generator it iterates)
                        # was judged as it was called
                        caller.f_code.co_filename.startswith(_PRIVATE_DIRS) or _shapes_only(frame, caller)):
                    return
                # PyTorch importing its own modules: a first use of some operator imports torch._dynamo,
                # whose imports run private modules' top-level code (definitions, registrations), and
                # what that code runs through C (class bodies, decorators). The grader's kernels have
                # those imported already; a student's fresh kernel does not.
                if caller.f_code is _RUNS_MODULE_CODE and below.f_code.co_name == "<module>" or (
                        caller.f_code.co_name == "<module>" and caller.f_code.co_filename.startswith(_TORCH_DIR)):
                    return
                # Public PyTorch calling its private code of its own accord (torch.broadcast_shapes runs
                # torch._refs): the student's call of a public function, whatever runs underneath. Only
                # private code that PyTorch's Python was handed (the vmap above) is the student's.
                if below is not frame and not _handed(code, frame.f_back, below):
                    return
                name = PRIVATE_IMPLEMENTATIONS
            note(name)

        return hook

    def __enter__(self):
        # in this thread and in threads the student's code starts meanwhile
        self._previous = (sys.getprofile(), threading.getprofile())
        self._hook = self._profile(self._previous[0]) if self.watch_code else None
        if self._hook is not None:
            sys.setprofile(self._hook)
            threading.setprofile(self._profile(self._previous[1]))
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            if self._hook is not None and sys.getprofile() is not self._hook:
                self.note(WATCH_SWITCHED_OFF)
            sys.setprofile(self._previous[0])
            threading.setprofile(self._previous[1])


@contextlib.contextmanager
def _quiet_fds():
    # C-level writes to fd 1/2 reach the notebook as a stream through ipykernel's capture
    saved = []
    try:
        for stream in (sys.__stdout__, sys.__stderr__):
            if stream is not None:
                stream.flush()
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            saved.append((fd, os.dup(fd)))
            os.dup2(devnull, fd)
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass  # no real fds (unusual embedders): Python-level capture still applies
    try:
        yield
    finally:
        for fd, copy in saved:
            os.dup2(copy, fd)
            os.close(copy)


@contextlib.contextmanager
def quiet():
    """Swallow whatever runs inside prints, warns or logs: nbgrader gives 0 points to a
    test cell that writes to stderr, and a correct solution that prints must pass."""
    previous_disable = logging.root.manager.disable
    # logging.disable empties the cache of every logger there is (PyTorch has hundreds): only
    # when the level changes
    if previous_disable < logging.CRITICAL:
        logging.disable(logging.CRITICAL)
    try:
        with warnings.catch_warnings(), _quiet_fds():
            warnings.simplefilter("ignore")
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                yield
    finally:
        if logging.root.manager.disable != previous_disable:
            logging.disable(previous_disable)


def _where(error: BaseException) -> str:
    """The last line of the student's own code in the traceback ('' if none)."""
    here = os.path.dirname(__file__)
    torch_dir = os.path.dirname(torch.__file__)
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        if not frame.filename.startswith((here, torch_dir)) and frame.line:
            return frame.line.strip()
    return ""


def is_stub(error: BaseException) -> bool:
    """The notebook's untouched ``raise NotImplementedError()``, not PyTorch's NotImplementedError
    for an operation it lacks (``"bitwise_or_cpu" not implemented for 'Float'``), which is a crash."""
    return isinstance(error, NotImplementedError) and not str(error)


NOT_IMPLEMENTED = "not implemented yet (raises NotImplementedError)"  # what a case of an untouched stub says


def describe_error(error: BaseException) -> str:
    if is_stub(error):
        return NOT_IMPLEMENTED
    text = f"raised {type(error).__name__}: {error}".strip().rstrip(":")
    line = _where(error)
    return text + (f"\n      at: {line}" if line else "")
