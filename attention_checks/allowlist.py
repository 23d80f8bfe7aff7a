"""What a student's code may use: an allowlist, read from the source (issue 58).

Every round of hostile submissions found a route that a list of forbidden routes did not name
(PyTorch's switches of its own modes, a signal handler, a file on a RAM disk, a name decoded at
run time). This module names what is allowed instead, and everything else is outside it:

* **imports** of the modules in ``IMPORTABLE`` only, and from a module only the names it lists
  (``"*"``: its public names that are not modules outside the list, less ``DENIED``);
* **builtins** in ``BUILTINS`` only: no ``exec``, ``eval``, ``compile``, ``__import__``,
  ``globals``, ``vars``, ``open``, ... ``getattr``, ``setattr``, ``hasattr`` and ``delattr`` only
  called directly with a name written out (``getattr(self, "w_q")``), which is then read as an
  attribute: a name built at run time cannot be looked up at all, so decoding, folding or
  concatenating names gains nothing;
* **attributes**: of a module, the names that module allows; of any other value, the public
  names of the values graded code meets (tensors, modules, parameters, sizes, dtypes, devices,
  PyTorch's named tuples, Python's own types, ...: ``attribute_names``) and the student's own
  names (attributes and class members their code defines). No name that starts with an
  underscore, except the student's own and ``super().__init__()``; none of ``DENIED``
  (storage, files, PyTorch's mode switches, frames and code objects, ...).

A module that allows only some names (``sys``: ``stdout`` and ``stderr``) is used only as
``module.name``: never as a value, where its other attributes would be read by name alone.

The check reads the source, never the running kernel: the grader decides from the submitted
cells, outside the student's process (``autograder.grading.scanner`` applies it to the code a
graded name can reach, and ``ANYWHERE`` rules to every cell), and the student's own notebook says
the same before submission (``registry.Check.run``). It cannot follow values: an attribute of
an unknown value is judged by its name alone, which is why ``DENIED`` names stay out whatever
owns them.
"""
from __future__ import annotations

import ast
import builtins
import functools
import importlib
import json
import re
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

# module -> the names code may take from it: "*" for its public names (see module docstring)
IMPORTABLE: dict[str, str | frozenset[str]] = {
    "torch": "*",
    "torch.nn": "*",
    "torch.nn.functional": "*",
    "torch.nn.init": "*",
    "torch.linalg": "*",
    "torch.fft": "*",
    "torch.special": "*",
    "torch.distributions": "*",
    "torch.optim": "*",
    "torch.utils.flop_counter": frozenset({"FlopCounterMode"}),  # counting a module's cost (04)
    "torch.nn.utils": frozenset({"clip_grad_norm_", "clip_grad_value_"}),  # a training step's clipping (07, 08, 11)
    "math": "*",
    "numpy": "*",
    "itertools": "*",
    "heapq": "*",  # a beam kept as a heap
    "operator": "*",  # less attrgetter and methodcaller (DENIED): a getattr by another name
    "statistics": "*",
    "random": "*",
    "__future__": frozenset({"annotations"}),
    "typing": frozenset({"Any", "Callable", "ClassVar", "DefaultDict", "Deque", "Dict", "Final", "FrozenSet",
                         "Generic", "Hashable", "Iterable", "Iterator", "List", "Literal", "Mapping", "NamedTuple",
                         "Optional", "Protocol", "Sequence", "Set", "Tuple", "Type", "TypedDict", "TypeVar",
                         "TYPE_CHECKING", "Union", "cast", "overload"}),
    "abc": frozenset({"ABC", "abstractmethod"}),
    "enum": frozenset({"Enum", "IntEnum", "auto"}),
    "contextlib": frozenset({"contextmanager", "nullcontext", "suppress"}),
    "functools": frozenset({"partial", "reduce", "lru_cache", "cache", "wraps", "cached_property"}),
    "collections": frozenset({"namedtuple", "OrderedDict", "defaultdict", "deque", "Counter"}),
    "dataclasses": frozenset({"dataclass", "field", "replace", "asdict", "astuple", "fields"}),
    "copy": frozenset({"copy", "deepcopy"}),
    "warnings": frozenset({"warn", "catch_warnings", "filterwarnings", "simplefilter"}),
    "logging": frozenset({"getLogger", "debug", "info", "warning", "error"}),
    "time": frozenset({"perf_counter", "perf_counter_ns", "monotonic", "process_time", "time"}),
    "pprint": frozenset({"pprint", "pformat"}),
    "tqdm": frozenset({"tqdm", "trange"}),  # a training loop's progress (the course's requirements)
    "tqdm.auto": frozenset({"tqdm", "trange"}),
    # where a model puts itself: whether there is a GPU, and waiting for it before a clock is read
    "torch.cuda": frozenset({"is_available", "device_count", "current_device", "get_device_name", "synchronize",
                             "manual_seed", "manual_seed_all", "memory_allocated", "max_memory_allocated",
                             "reset_peak_memory_stats", "empty_cache"}),
    "torch.backends": frozenset({"mps"}),
    "torch.backends.mps": frozenset({"is_available", "is_built"}),
    "sys": frozenset({"stdout", "stderr"}),  # print(..., file=sys.stderr)
}
# Names no code may use, whatever owns them: storage and files (memory the sandbox cannot count),
# PyTorch's switches of its modes and dispatch, compilers and tracers that run code of their own,
# frames and code objects (a way to any global), threads, and modules outside IMPORTABLE.
DENIED = frozenset({
    "load", "save", "from_file", "tofile", "fromfile", "memmap", "loadtxt", "savetxt", "savez", "savez_compressed",
    "genfromtxt", "fromregex", "DataSource", "share_memory_", "storage", "untyped_storage", "set_",
    "DisableTorchFunction", "DisableTorchFunctionSubclass", "ExcludeDispatchKeyGuard", "DispatchKey",
    "DispatchKeySet", "set_default_device", "compile", "vmap", "cond", "while_loop", "fork", "settrace",
    "setprofile", "f_globals", "f_locals", "f_back", "f_builtins", "f_code", "tb_frame", "tb_next", "gi_frame",
    "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code", "co_code", "co_consts", "modules",
    "attrgetter", "methodcaller",
})
DENIED_PATTERN = re.compile(r"Storage|^Script|^PyTorchFile|Serializ|Dispatch")
# Dunder names code may define and call on its own classes
DUNDERS = frozenset({"__init__", "__call__", "__len__", "__getitem__", "__iter__", "__repr__", "__str__",
                     "__eq__", "__hash__", "__contains__", "__post_init__"})
BUILTINS = frozenset({
    "abs", "all", "any", "ascii", "bin", "bool", "bytes", "callable", "chr", "classmethod", "complex", "dict",
    "divmod", "enumerate", "filter", "float", "format", "frozenset", "hash", "hex", "id", "int", "isinstance",
    "issubclass", "iter", "len", "list", "map", "max", "min", "next", "object", "oct", "ord", "pow", "print",
    "property", "range", "repr", "reversed", "round", "set", "slice", "sorted", "staticmethod", "str", "sum",
    "super", "tuple", "type", "zip", "NotImplemented", "Ellipsis", "None", "True", "False",
    "getattr", "setattr", "hasattr", "delattr",  # with a name written out (see NAME_READERS)
}) | frozenset(n for n in dir(builtins) if n.endswith(("Error", "Exception", "Warning")) or n in (
    "StopIteration", "BaseException"))
NAME_READERS = frozenset({"getattr", "setattr", "hasattr", "delattr"})
IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$")
# the cell magics and line magics a student's cell may use (IPython turns them into calls of
# get_ipython(); the Python that %time, %%time, %timeit, %%capture run is read as any cell's)
MAGICS = frozenset({"time", "timeit", "capture", "matplotlib", "pip", "pinfo", "pinfo2", "config"})
# %config runs its line as Python: only how inline figures look, set to a literal, is a cell's to say
INLINE_FIGURES = re.compile(r"^\s*InlineBackend\.[A-Za-z_]\w*\s*=(.*)$")
# line magics whose argument is Python (name? and name?? are %pinfo and %pinfo2 of an expression)
PYTHON_MAGICS = frozenset({"time", "timeit", "pinfo", "pinfo2"})
# How a use outside the allowlist is named among a check's findings, and what the message offers instead
OUTSIDE = "outside the allowlist: "
ALLOWED_INSTEAD = ("graded code may use Python's builtins (no exec, eval, open, globals, vars, ...), torch, torch.nn, "
                   "torch.nn.functional, math and the other modules the course lists, and the public attributes of "
                   "tensors, modules and your own objects; no name that starts with an underscore but your own, and "
                   "getattr or setattr only with a name written out")


@dataclass(frozen=True)
class Outside:
    """One use of something outside the allowlist: what (as the student wrote it) and where."""

    what: str
    node: ast.AST


# Modules that allow a few names and are reached only by their path (nn.utils.clip_grad_norm_):
# their own name is no public name of their parent, so "utils" is no attribute of other values
PATH_ONLY = frozenset({"torch.nn.utils"})


def _public(module: types.ModuleType) -> set[str]:
    names = set()
    for name in dir(module):
        if name.startswith("_") or name in DENIED or DENIED_PATTERN.search(name):
            continue
        value = getattr(module, name, None)
        if isinstance(value, types.ModuleType) and (value.__name__ not in IMPORTABLE or value.__name__ in PATH_ONLY):
            continue
        names.add(name)
    return names


# The names, as the course's PyTorch gives them (computed once by ``python -m
# attention_checks.allowlist``, which tests/test_allowlist.py holds to the installed PyTorch):
# reading them takes milliseconds, computing them seconds, and the grader decides by the same
# list on every machine, whatever PyTorch a student's notebook runs.
NAMES_FILE = Path(__file__).with_name("allowed_names.json")


@functools.lru_cache(maxsize=None)
def _shipped() -> dict:
    return json.loads(NAMES_FILE.read_text())


def module_names(module: str) -> frozenset[str]:
    """The names code may take from ``module`` (one of IMPORTABLE)."""
    allowed = IMPORTABLE[module]
    return frozenset(allowed) if allowed != "*" else frozenset(_shipped()["modules"][module])


@functools.lru_cache(maxsize=None)
def attribute_names() -> frozenset[str]:
    """The public names of the values graded code meets (computed_names)."""
    return frozenset(_shipped()["attributes"])


def computed_names() -> dict:
    """What NAMES_FILE holds: each "*" module's names, and the attribute names of the values
    graded code meets: what a module allows, and the public attributes of every class among them
    (torch.Tensor, each nn module and what its instances are given, torch.Size, ...), of
    PyTorch's named tuples and of Python's own types."""
    import torch

    modules = {m: sorted(_public(importlib.import_module(m))) for m, allowed in IMPORTABLE.items() if allowed == "*"}
    names: set[str] = set()
    classes: list[type] = [list, dict, tuple, set, frozenset, str, bytes, int, float, complex, bool, range, slice,
                           object, BaseException, functools.partial, type(functools.lru_cache(print)),
                           torch.finfo, torch.iinfo]
    for module, allowed in IMPORTABLE.items():
        for name in (modules[module] if allowed == "*" else allowed):
            names.add(name)
            value = getattr(importlib.import_module(module), name, None)
            if isinstance(value, type):
                classes.append(value)
    classes += [getattr(torch.return_types, n) for n in dir(torch.return_types) if not n.startswith("_")
                and isinstance(getattr(torch.return_types, n), type)]
    for cls in classes:
        names.update(n for n in dir(cls) if not n.startswith("_"))
        names.update(n for n in _instance_attributes(cls) if not n.startswith("_"))
    attributes = sorted(n for n in names if n not in DENIED and not DENIED_PATTERN.search(n))
    return {"torch": torch.__version__.split("+")[0], "modules": modules, "attributes": attributes}


def _instance_attributes(cls: type) -> set[str]:
    """The attributes a PyTorch module gives its instances (``self.weight = ...`` in its code,
    ``self.register_parameter("bias", ...)``, annotated ones): an nn.Linear's ``bias``."""
    import inspect

    if not cls.__module__.startswith("torch.nn"):
        return set()
    try:
        tree = ast.parse(inspect.getsource(cls))
    except (OSError, TypeError, SyntaxError):
        return set()
    annotated = {n for klass in cls.__mro__ for n in getattr(klass, "__annotations__", {})}
    return set(own_names([tree])) | annotated


def own_names(trees: Iterable[ast.AST]) -> frozenset[str]:
    """The names the student's code gives to attributes and class members: ``x.name = ...``,
    ``def name`` or ``name = ...`` in a class body, ``setattr(x, "name", ...)`` and the string
    names of ``register_buffer``, ``register_parameter``, ``register_module``, ``namedtuple``."""
    names: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.ClassDef):
                for statement in node.body:
                    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        names.add(statement.name)
                    elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
                        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                        names.update(t.id for t in targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.Call):
                called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                texts = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                if called in ("setattr", "register_buffer", "register_parameter", "register_module", "add_module"):
                    names.update(t for t in texts if IDENTIFIER.match(t))
                elif called in ("namedtuple", "NamedTuple"):
                    names.update(w for t in texts for w in re.split(r"[,\s]+", t) if IDENTIFIER.match(w))
                    for arg in node.args:
                        if isinstance(arg, (ast.List, ast.Tuple)):
                            names.update(e.value for e in arg.elts if isinstance(e, ast.Constant)
                                         and isinstance(e.value, str))
    # a name of PyTorch's own private machinery is never the student's, even if their code assigns it
    return frozenset(n for n in names if not (n.startswith("_") and _is_torch_private(n)))


@functools.lru_cache(maxsize=None)
def _torch_private_names() -> frozenset[str]:
    import torch

    owners = [torch, torch.nn, torch.nn.functional, torch.Tensor, torch.nn.Module, torch.nn.Parameter]
    return frozenset(n for owner in owners for n in dir(owner) if n.startswith("_"))


def _is_torch_private(name: str) -> bool:
    """PyTorch's private names and Python's dunders (__class__, __dict__): never the student's.
    A name the student mangles (self.__keys, no trailing __) is theirs."""
    return name in _torch_private_names() or (name.startswith("__") and name.endswith("__"))


class Bindings:
    """What names mean in the student's cells: those bound by an import (name -> "module" or
    "module:name"; the course's cells' imports too, which a student's cell may use without
    importing), every other name the student's code binds, and those it binds again after
    (``self = torch``): enough to tell a module, a builtin, the course's globals and the
    student's own names apart."""

    def __init__(self, trees: Iterable[ast.AST], course_trees: Iterable[ast.AST] = ()):
        self.imports: dict[str, str] = {}
        self.bound: set[str] = set()
        self.assigned: set[str] = set()  # names an assignment binds (``self = torch``)
        for tree in course_trees:
            for node in ast.walk(tree):
                self._import(node)
        for tree in trees:
            for node in ast.walk(tree):
                self._import(node)
                if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                    self.bound.add(node.id)
                    self.assigned.add(node.id)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    self.bound.add(node.name)
                elif isinstance(node, ast.arg):
                    self.bound.add(node.arg)
                elif isinstance(node, ast.ExceptHandler) and node.name:
                    self.bound.add(node.name)
        self.bound -= set(self.imports)

    def _import(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                self.imports[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom) and not node.level:
            for alias in node.names:
                self.imports[alias.asname or alias.name] = f"{node.module}:{alias.name}"

    def module_of(self, name: str) -> str | None:
        """The module an import binds ``name`` to (``import torch.nn as nn``, ``from torch import
        nn``), or None (not imported, or a name that is no module IMPORTABLE knows)."""
        target = self.imports.get(name)
        if target is None or ":" not in target:
            return target
        module, attribute = target.split(":")
        return f"{module}.{attribute}" if f"{module}.{attribute}" in IMPORTABLE else None


# What any of the student's cells may import, graded or not: IMPORTABLE, the course's checks (whose
# use the source scan judges: reading and calling them is fine), what a notebook plots or times with,
# and what compares with PyTorch's or prints (torch.testing.assert_close, json.dumps). Not what writes
# files (os, pathlib, torch.save: a file beside the notebook named like a module is code a later
# import runs unscanned) or evaluates expressions given as text (pandas.eval)
ANYWHERE_IMPORTS = ("attention_checks", "matplotlib", "time", "timeit", "IPython.display", "ipywidgets", "pprint",
                    "random", "statistics", "string", "textwrap", "re", "json", "torch.testing")
# Builtins no cell may use: they run code given as text, reach every global, or open files
ANYWHERE_DENIED_BUILTINS = frozenset({"exec", "eval", "compile", "__import__", "globals", "locals", "vars", "open",
                                      "breakpoint", "input", "memoryview", "exit", "quit"})
# Dunders any cell may read: documentation and names
READ_ONLY_DUNDERS = frozenset({"__doc__", "__name__", "__qualname__", "__module__", "__all__", "__version__"})
# A named tuple's public API, underscored so as not to clash with its fields (a beam's hypotheses)
NAMED_TUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults"})


class Reader:
    """Reads the student's cells (``trees``) for what they use outside the allowlist. Code that
    a graded name can reach is held to the whole allowlist (``graded``); any other cell of the
    student's only to what reaches past it (imports, the builtins that run code or reach every
    global, names built at run time, private and DENIED names), since it runs in the same
    process as graded code. ``course_trees``: the course's cells (whose imports a student's cell
    may use)."""

    def __init__(self, trees: Iterable[ast.AST], course_trees: Iterable[ast.AST] = ()):
        self.trees = list(trees)
        self.bindings = Bindings(self.trees, list(course_trees))
        self.own = own_names(self.trees)
        self.parents: dict[int, ast.AST] = {id(child): node for tree in self.trees for node in ast.walk(tree)
                                            for child in ast.iter_child_nodes(node)}
        self.graded = True

    def anywhere(self) -> list[Outside]:
        """What any of the cells uses that no cell may."""
        return [found for tree in self.trees for found in self.within(tree, graded=False)]

    def within(self, root: ast.AST, graded: bool = True) -> list[Outside]:
        """What the code under ``root`` (a cell, a function, a class) uses outside the allowlist:
        of a chain (torch._C.DisableTorchFunction), its first step outside (torch._C)."""
        found = {id(node): Outside(what, node) for node in ast.walk(root) if (what := self.outside(node, graded))}
        return [use for use in found.values()
                if not (isinstance(use.node, ast.Attribute) and _steps_outside(use.node.value, found))]

    def outside(self, node: ast.AST, graded: bool = True) -> str | None:
        """What ``node`` itself uses outside the allowlist (as the student wrote it), or None."""
        self.graded = graded
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return self._import(node)
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)) and self._of_a_module(node):
            return f"a change to {_dotted(node)}"  # torch.exp = ..., del F.relu: every cell after sees it
        if isinstance(node, ast.Attribute):
            return self._attribute(node)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            return self._name(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in NAME_READERS \
                and node.func.id not in self.bindings.bound:
            return self._name_reader(node)
        return None

    def _import(self, node: ast.Import | ast.ImportFrom) -> str | None:
        if isinstance(node, ast.Import):
            paths = [(alias.name, None) for alias in node.names]
        else:
            paths = [(f"{'.' * node.level}{node.module or ''}", alias.name) for alias in node.names]
        for module, name in paths:
            shown = f"import {module}" if name is None else f"from {module} import {name}"
            if not self.graded and (module.split(".")[0] in ANYWHERE_IMPORTS or module in ANYWHERE_IMPORTS):
                continue
            if module not in IMPORTABLE:
                return shown
            if name is not None and (name == "*" or (name not in module_names(module)
                                                     and f"{module}.{name}" not in IMPORTABLE)):
                return shown
        return None

    def _name_reader(self, node: ast.Call) -> str | None:
        """getattr(obj, "name") reads obj.name; with a name built at run time, only the student's
        own object (``self``, never rebound) may be read, since the step after that needs a name
        written out."""
        name = node.args[1] if len(node.args) > 1 else None
        if isinstance(name, ast.Constant) and isinstance(name.value, str) and IDENTIFIER.match(name.value):
            return self._attribute_name(name.value, node.args[0])
        if node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == "self" \
                and "self" not in self.bindings.assigned:
            return None
        return f"{node.func.id} with a name built at run time"

    def _name(self, node: ast.Name) -> str | None:
        name = node.id
        parent = self.parents.get(id(node))
        module = self.bindings.module_of(name)
        if module is not None:
            if module not in IMPORTABLE:
                return None if not self.graded and module.split(".")[0] in ANYWHERE_IMPORTS \
                    else f"the module {module}"
            if IMPORTABLE[module] != "*" and not (isinstance(parent, ast.Attribute) and parent.value is node):
                return f"{name} as a value (only {name}.<name> is allowed)"
            return None
        if name in self.bindings.bound or name in self.bindings.imports:
            return None
        if name in ANYWHERE_DENIED_BUILTINS:
            return f"the builtin {name}"
        if name.startswith("_") and name != "_" and name not in READ_ONLY_DUNDERS:
            return name  # IPython's and Python's own (_ih, _i3, __builtins__)
        if name in NAME_READERS and not (isinstance(parent, ast.Call) and parent.func is node):
            return f"{name} as a value"
        if self.graded and hasattr(builtins, name) and name not in BUILTINS and name not in READ_ONLY_DUNDERS:
            return f"the builtin {name}"
        if name == "get_ipython":
            return self._magic(parent)
        return None  # the course's own globals (the setup cell's torch, nn, F, math, the checks)

    def _magic(self, call: ast.AST | None) -> str | None:
        """IPython's own call for a %magic line (get_ipython().run_line_magic("time", "y = f(x)")):
        a magic of MAGICS in a cell that is not graded code, whose Python is read as any cell's;
        anything else of IPython's is outside."""
        method = self.parents.get(id(call)) if isinstance(call, ast.Call) else None
        outer = self.parents.get(id(method)) if isinstance(method, ast.Attribute) else None
        args = [a.value if isinstance(a, ast.Constant) else None for a in outer.args] \
            if isinstance(outer, ast.Call) and outer.func is method else []
        magic = args[0] if args else None
        if isinstance(method, ast.Attribute) and method.attr in ("system", "getoutput"):
            return "a shell command (!...)"
        if self.graded or not isinstance(method, ast.Attribute) \
                or method.attr not in ("run_line_magic", "run_cell_magic") or magic not in MAGICS:
            return f"%{magic}" if isinstance(magic, str) else "get_ipython()"
        if method.attr == "run_line_magic" and magic in PYTHON_MAGICS:  # the cell magics' code is a cell of its own
            return self._code(args[1] if len(args) > 1 else None)
        if magic == "config":  # %config InlineBackend.figure_format = 'retina'
            setting = INLINE_FIGURES.match(args[1]) if len(args) > 1 and isinstance(args[1], str) else None
            return None if setting is not None and _literal(setting.group(1)) else "%config"
        return None

    def _code(self, code: object) -> str | None:
        """What Python given as text to a magic uses that no cell may (its options first:
        %timeit -n 3 -r 2 y = f(x))."""
        if isinstance(code, str):
            code = re.sub(r"^\s*(?:-[nrp]\s*\d+\s+|-[tcqo]\s+)*", "", code)
        try:
            tree = ast.parse(code) if isinstance(code, str) else None
        except SyntaxError:
            tree = None
        if tree is None:
            return "%time or %timeit of code that is not written out"
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node
        found = self.within(tree, graded=False)
        return found[0].what if found else None

    def _attribute(self, node: ast.Attribute) -> str | None:
        base = node.value
        if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super" \
                and node.attr in DUNDERS:
            return None  # super().__init__()
        if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "get_ipython":
            return None  # said once, at get_ipython (_magic)
        if node.attr in READ_ONLY_DUNDERS and isinstance(node.ctx, ast.Load):
            return None  # a name or a docstring, as text: type(x).__name__ in an error message
        call = self.parents.get(id(node))
        called = isinstance(call, ast.Call) and call.func is node
        if called and node.attr == "__init__" and call.args and isinstance(call.args[0], ast.Name) \
                and call.args[0].id == "self":
            return None  # nn.Module.__init__(self), as super().__init__() says it
        if called and node.attr == "modules" and not (call.args or call.keywords) and self._module(base) is None:
            return None  # a module's submodules (model.modules()); never a namespace's sys.modules
        return self._attribute_name(node.attr, base)

    def _attribute_name(self, attr: str, base: ast.AST) -> str | None:
        module = self._module(base)
        shown = f"{_dotted(base)}.{attr}"
        if attr in DENIED or DENIED_PATTERN.search(attr):
            return shown
        if attr in self.own:
            return None
        if attr.startswith("_"):
            if not self.graded and attr in READ_ONLY_DUNDERS or attr in NAMED_TUPLE_API and module is None:
                return None
            return None if attr in DUNDERS and isinstance(base, ast.Name) and base.id in self.bindings.bound \
                else shown
        if not self.graded:
            return None
        if module is not None:  # an attribute of a module: what that module allows
            allowed = module in IMPORTABLE and attr in module_names(module)
            return None if allowed or _passage(f"{module}.{attr}") else shown
        return None if attr in attribute_names() else shown

    def _of_a_module(self, node: ast.Attribute) -> bool:
        """Whether the chain ``node`` starts at a module (torch.Tensor.exp, sys.stdout, np.e)."""
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and node.id not in self.bindings.bound and (
            node.id in self.bindings.imports or node.id in COURSE_MODULES)

    def _module(self, node: ast.AST) -> str | None:
        """The module ``node`` statically names (torch, torch.nn, F, an alias), or None."""
        if isinstance(node, ast.Name):
            module = self.bindings.module_of(node.id)
            if module is None and node.id not in self.bindings.bound:
                module = COURSE_MODULES.get(node.id)
            return module if module in IMPORTABLE else None
        if isinstance(node, ast.Attribute):
            parent = self._module(node.value)
            if parent is not None and _passage(f"{parent}.{node.attr}"):
                return f"{parent}.{node.attr}"
        return None


def _steps_outside(node: ast.AST, found: dict[int, Outside]) -> bool:
    """Whether a step of the chain ``node`` (a.b.c, f(x).y) is itself among ``found``."""
    while True:
        if id(node) in found:
            return True
        if isinstance(node, ast.Attribute):
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        else:
            return False


def _passage(path: str) -> bool:
    """Whether ``path`` is a module of IMPORTABLE or on the way to one (torch.utils, on the way
    to torch.utils.flop_counter, allows nothing else of its own)."""
    return any(module == path or module.startswith(path + ".") for module in IMPORTABLE)


# The modules the course's setup cells give every notebook, by the names they give them
COURSE_MODULES = {"torch": "torch", "nn": "torch.nn", "F": "torch.nn.functional", "math": "math", "np": "numpy"}


class Use(str):
    """A use outside the allowlist, as a check's findings name it (OUTSIDE + what), with
    ``line``: the student's line of code where it is."""

    line: str

    def __new__(cls, what: str, line: str = ""):
        use = super().__new__(cls, OUTSIDE + what)
        use.line = line
        return use


def uses_outside(student: object) -> list[Use]:
    """In the student's own notebook: what the cell that defines ``student`` (a function or a
    class) and the cells of the functions and classes it names use outside the allowlist, as the
    grader reads the submitted notebook (which also holds every cell to ANYWHERE's rules, and
    follows values: what it finds decides). Nothing when the cells cannot be read (a function
    made by exec, a notebook whose history is gone)."""
    try:
        cells = _cells_of(student)
        trees = [ast.parse(source) for source in cells]
    except Exception:  # noqa: BLE001 - the student's own kernel: a check never fails for this
        return []
    reader = Reader(trees)
    found: dict[str, Use] = {}
    for source, tree in zip(cells, trees):
        lines = source.splitlines()
        for outside in reader.within(tree):
            number = getattr(outside.node, "lineno", 0)
            found.setdefault(outside.what, Use(outside.what, lines[number - 1].strip() if 0 < number <= len(lines)
                                                else ""))
    return list(found.values())


def _cells_of(student: object, most: int = 20) -> list[str]:
    """The source of the cell that defines ``student``, and of the cells that define the
    functions and classes its cell names, as IPython keeps them (linecache): only what a cell of
    the notebook defines (``__module__`` is ``__main__``)."""
    import inspect
    import linecache

    def code_of(obj: object):
        if isinstance(obj, type):
            functions = [v for v in vars(obj).values() if hasattr(v, "__code__")]
            obj = functions[0] if functions else None
        try:  # a decorated function (@torch.no_grad()): the student's own, not the library's wrapper
            obj = inspect.unwrap(obj)
        except ValueError:  # a cycle of __wrapped__
            pass
        code = getattr(obj, "__code__", None)
        if code is None or _library_file(code.co_filename):
            return None, None
        return code, getattr(obj, "__globals__", {})

    cells: dict[str, str] = {}
    todo = [student]
    while todo and len(cells) < most:
        obj = todo.pop()
        code, namespace = code_of(obj) if getattr(obj, "__module__", None) == "__main__" else (None, None)
        if code is None or code.co_filename in cells:
            continue  # not defined in a cell of the notebook (PyTorch's, the course's checks), or read
        source = "".join(linecache.getlines(code.co_filename))
        if not source:
            continue
        cells[code.co_filename] = source
        tree = ast.parse(source)
        # the globals the cell reads: a local of the same name as another cell's function
        # (cross_attention in a forward, beside the course's plotting function) is not that function
        bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        bound |= {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound
        todo += [namespace[n] for n in names if n in namespace and (isinstance(namespace[n], type)
                                                                   or hasattr(namespace[n], "__code__"))]
    return list(cells.values())


def _literal(text: str) -> bool:
    """Whether ``text`` is a Python literal ('retina', 100, {'dpi': 100})."""
    try:
        ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


def _library_file(filename: str) -> bool:
    """Whether ``filename`` is the source of an installed library (Python's, PyTorch's wrapper of
    a decorated function), never a notebook's cell: reading it would hold PyTorch to the allowlist."""
    import os
    import site
    import sysconfig

    paths = sysconfig.get_paths()
    roots = [paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths]
    roots += [*site.getsitepackages(), site.getusersitepackages()]
    real = os.path.realpath(filename)
    return any(real.startswith(os.path.realpath(root) + os.sep) for root in roots)


def _dotted(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # noqa: BLE001 - only for the message
        return "..."


if __name__ == "__main__":  # python -m attention_checks.allowlist: NAMES_FILE anew, for this PyTorch
    NAMES_FILE.write_text(json.dumps(computed_names(), indent=0, sort_keys=True) + "\n")
    print(f"wrote {NAMES_FILE}")
