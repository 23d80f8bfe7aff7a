"""The functional publish scan: nothing students get earns a graded name's points.

The line scan (``publish.scan``) finds a model solution's lines; the same algorithm written
otherwise passes it. This scan runs what students get instead: every function and class of every
``.py`` file, of the wheel's modules, and of the code cells of the book's pages and of the
notebooks, is tried as each graded name whose call it can take, on that name's hidden cases,
judged by the grader's references. A candidate is called directly and through the adapters a
student would write around it: the positional arguments in another order, an integer argument given
as a one-item list, the inputs' device passed as ``device=``, only the keyword arguments it takes
(a causal flag it has no use for dropped), once per head (the last two dimensions) and, where the
call asks for causal attention, once per query row over the keys up to it (row i sees keys 0..i),
once per row of the last dimension (a (maximum, sum) pair it returns made the softmax
exp(x - m) / l); a class is built as the check builds it and, where its constructor needs more,
with small values for the arguments the check does not give (a student's default arguments); a
class's public methods are tried as functions too, a method's ``self`` given the check's model with
``encode`` and ``decode`` made of the model's call (a four-line wrapper around a book's decoding
loop). Its tensors are cast to the inputs' dtype and device. One that earns more than
``LEAK_SHARE`` (a quarter) of a graded name's points fails publish (of the points a do-nothing
answer, its first argument back, does not already earn: ``leak_bar``), named with its file, the
points it earns and the adapter.

What runs: of each source only its imports and its definitions (functions, classes, lambdas bound
to a name): no experiment of a page runs. It runs in a child process (``python -m
autograder.instructor.functional JOB``) in bubblewrap without a network, each definition's import
and each hidden case of a trial under a time limit (a case past it earns nothing, the others keep
their points: a slow leak is still a leak), the global RNG seeded before each trial: the same
files give the same report. The sandbox's /tmp is its own, but what the interpreter runs from stays visible
wherever it lives (a virtual environment under /tmp too); ``sandbox_problem`` runs the child's
imports there once, so that publish can refuse before it builds anything. The graded names of the
assignments an instructor revealed (their answers are published on purpose) are left out.
"""
from __future__ import annotations

import ast
import copy
import functools
import hashlib
import importlib.util
import inspect
import itertools
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import types
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import yaml
from attention_checks import published

from autograder.layout import REPO_ROOT, SOLUTIONS_DIR

LEAK_SHARE = 0.25  # a published piece that earns more than this share of a graded name's hidden points fails publish
CASE_SECONDS = 90  # one hidden case of a trial: a case past it earns nothing, the others keep their points
LOAD_SECONDS = 120  # one source's imports and definitions
SKIPPED_FOLDERS = {"_build", ".git", "__pycache__", ".ipynb_checkpoints", ".venv"}
# A MyST page's code cell: its fence line, its body (options first), its closing fence.
CODE_CELL = re.compile(r"^(?P<fence>`{3,})\{code-cell\}[^\n]*\n(?P<body>.*?)^(?P=fence)[ \t]*$", re.S | re.M)
CELL_OPTION = re.compile(r"^:(?P<key>[\w-]+):(?P<value>.*)$")


@dataclass(frozen=True)
class Earned:
    """A function or class of the distribution that earns a graded name's points."""

    file: str
    function: str
    graded: str
    points: float
    of: float
    adapter: str

    def line(self) -> str:
        return (f"{self.file}: {self.function} earns {self.points:g} of {self.of:g} points as {self.graded} "
                f"(called {self.adapter})")


@dataclass
class FunctionalReport:
    sources: int = 0  # files and pages read (a copy of one already read counts once)
    candidates: int = 0  # functions and classes found
    trials: int = 0  # candidate x graded name x adapter calls run on the hidden cases
    earned: list[Earned] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # sources that could not be read (not a leak)

    def summary(self) -> str:
        return (f"functional scan: {self.candidates} functions and classes of {self.sources} sources, tried as "
                f"the graded names on their hidden cases ({self.trials} trials): {len(self.earned)} earn points"
                + (f" ({len(self.problems)} sources with code that could not run)" if self.problems else ""))


# --------------------------------------------------------------------------------------------
# the parent's side


def hidden_cases(source_dir: Path = SOLUTIONS_DIR, revealed: frozenset[str] = frozenset()) -> dict[str, list[dict]]:
    """Graded name -> its hidden check calls (cases, points), from the source notebooks; none of
    the ``revealed`` assignments (their answers are published on purpose)."""
    from autograder.grading import release

    found: dict[str, list[dict]] = {}
    for assignment in sorted(set(release.find_assignments(source_dir)) - revealed):
        for call in release.hidden_calls(source_dir, assignment):
            found.setdefault(call.check.name, []).append(dict(cases=list(call.cases), points=call.points))
    return found


def interpreter_paths(python: str) -> list[str]:
    """Where ``python`` runs from: its own folder, its prefixes and every folder of its sys.path, as
    it reports them (a virtual environment may live anywhere, /tmp included), and this repository."""
    asked = subprocess.run([python, "-c", "import json, sys; print(json.dumps([sys.prefix, sys.base_prefix, "
                            "sys.exec_prefix, *sys.path]))"], capture_output=True, text=True, cwd=REPO_ROOT,
                           timeout=60)
    if asked.returncode:
        raise RuntimeError(f"{python} does not run: {asked.stderr.strip()[-500:]}")
    return [str(Path(python).parent), *json.loads(asked.stdout), str(REPO_ROOT)]


def _sandboxed(command: list[str], folder: Path, work: Path) -> list[str]:
    """``command`` in bubblewrap: the system and ``folder`` read-only, no network, its own /tmp,
    ``work`` writable. What the interpreter ``command[0]`` needs stays visible (read-only) when it
    lives under /tmp."""
    if shutil.which("bwrap") is None:
        raise RuntimeError("the functional scan runs in bubblewrap (bwrap), which is not installed")
    under_tmp = sorted({str(Path(p).resolve()) for p in interpreter_paths(command[0])
                        if p and Path(p).exists() and Path(p).resolve().is_relative_to("/tmp")})
    kept = [arg for path in under_tmp for arg in ("--ro-bind", path, path)]
    return ["bwrap", "--die-with-parent", "--unshare-net", "--unshare-pid", "--ro-bind", "/", "/",
            "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", *kept, "--ro-bind", str(folder), str(folder),
            "--bind", str(work), str(work), *command]


# What the scan's child imports first: a dry run of it in the sandbox shows that the scan can run.
DRY_RUN = "import attention_checks.registry, autograder.instructor.functional"


def sandbox_problem(python: str = sys.executable, timeout: float = 300) -> str | None:
    """Why the functional scan cannot run with ``python`` in its sandbox (no bubblewrap, an
    interpreter or a package it cannot see there), or None: the scan's own imports, run there."""
    try:
        with tempfile.TemporaryDirectory(prefix="publish-dry-run-") as tmp:
            command = _sandboxed([python, "-c", DRY_RUN], Path(tmp), Path(tmp))
            run = subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT, timeout=timeout)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    if run.returncode:
        return (f"{python} could not start its imports in the sandbox (exit {run.returncode}): "
                f"{run.stderr.strip()[-1000:]}")
    return None


def functional_scan(folder: Path, source_dir: Path = SOLUTIONS_DIR, timeout: float = 1800,
                    revealed: frozenset[str] = frozenset(), python: str = sys.executable) -> FunctionalReport:
    """Try every function and class under ``folder`` as each graded name (see the module's docstring),
    except the names of the ``revealed`` assignments; the child runs with ``python``."""
    folder = Path(folder).resolve()
    with tempfile.TemporaryDirectory(prefix="publish-functional-") as tmp:
        work = Path(tmp)
        job = work / "job.json"
        graded = published.encode(hidden_cases(source_dir, revealed), {})  # cases keep their tuples
        job.write_text(json.dumps(dict(folder=str(folder), graded=graded,
                                       report=str(work / "report.json"))), encoding="utf-8")
        command = _sandboxed([python, "-m", "autograder.instructor.functional", str(job)], folder, work)
        run = subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT, timeout=timeout)
        if run.returncode or not (work / "report.json").is_file():
            raise RuntimeError(f"the functional scan stopped (exit {run.returncode}): {run.stderr.strip()[-2000:]}")
        data = json.loads((work / "report.json").read_text(encoding="utf-8"))
    return FunctionalReport(data["sources"], data["candidates"], data["trials"],
                            [Earned(**e) for e in data["earned"]], data["problems"])


# --------------------------------------------------------------------------------------------
# the child's side: the sources, their definitions, the trials


@dataclass(frozen=True)
class Source:
    """Code students get: a file's or a page's, where it is, and how its imports resolve."""

    name: str  # shown in the report: a path under the distribution (a wheel's member after "!")
    code: str
    path_dir: Path | None = None  # put on sys.path while it loads (a plain module's folder)
    package: tuple[str, Path] | None = None  # (dotted name inside its top package, top package's folder)


def _package_of(path: Path, root: Path) -> tuple[str, Path] | None:
    """(module's dotted name inside its top package, the top package's folder) of a file in a package."""
    parts, folder = [path.stem], path.parent
    while (folder / "__init__.py").is_file() and folder != root.parent:
        parts.insert(0, folder.name)
        folder = folder.parent
    return (".".join(parts), folder / parts[0]) if len(parts) > 1 else None


def cell_parts(body: str) -> tuple[str, str]:
    """(the options, the code) of a MyST code cell's body: a YAML header between `---` lines, or
    `:key: value` lines, then the code."""
    if body.startswith("---\n"):
        header, _, code = body[4:].partition("\n---\n")
        return header, code
    lines = body.split("\n")
    count = next((i for i, line in enumerate(lines) if not CELL_OPTION.match(line)), len(lines))
    return "\n".join(line[1:].replace(":", ": ", 1) for line in lines[:count]), "\n".join(lines[count:])


def cell_options(body: str) -> dict:
    """The options of a MyST code cell (its tags, its figure, ...), from its body."""
    return yaml.safe_load(cell_parts(body)[0]) or {}


def page_code(text: str) -> list[str]:
    """The code of each code cell of a MyST page, without the cell's options."""
    return [cell_parts(cell["body"])[1] for cell in CODE_CELL.finditer(text)]


def _sources_of_tree(root: Path, shown: str) -> Iterator[Source]:
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not SKIPPED_FOLDERS & set(p.relative_to(root).parts)):
        name = f"{shown}{path.relative_to(root)}"
        if path.suffix == ".py":
            yield Source(name, path.read_text(encoding="utf-8", errors="replace"), path.parent, _package_of(path, root))
        elif path.suffix == ".ipynb":
            try:
                cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
            except ValueError:
                continue
            code = ["".join(c["source"]) if isinstance(c.get("source"), list) else c.get("source", "")
                    for c in cells if c.get("cell_type") == "code"]
            yield Source(name, "\n\n".join(code), path.parent)
        elif path.suffix == ".md":
            cells = page_code(path.read_text(encoding="utf-8", errors="replace"))
            if cells:
                yield Source(name, "\n\n".join(cells), path.parent)


def sources(folder: Path, unpacked: Path) -> Iterator[Source]:
    """Every source under ``folder``, the members of its wheels (unpacked into ``unpacked``) too."""
    yield from _sources_of_tree(folder, "")
    for wheel in sorted(p for p in folder.rglob("*.whl") if "_build" not in p.parts):
        target = unpacked / wheel.name
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(target)
        yield from _sources_of_tree(target, f"{wheel.relative_to(folder)}!")


def definitions(code: str) -> ast.Module | None:
    """The imports and definitions of ``code`` (IPython's magics dropped): what is run of it."""
    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in code.split("\n"))
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    kept = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    body = [node for node in tree.body if isinstance(node, kept) or (
        isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda))]
    return ast.Module(body=body, type_ignores=[])


class TimeUp(BaseException):
    """A load or a trial ran past its time (a BaseException: the probe's `except Exception` lets it by)."""


class _Limit:
    def __init__(self, seconds: int):
        self.seconds = seconds

    def _ring(self, *_):
        raise TimeUp()

    def __enter__(self):
        signal.signal(signal.SIGALRM, self._ring)
        signal.alarm(self.seconds)

    def __exit__(self, *exc):
        signal.alarm(0)


_ALIASES: dict[Path, str] = {}


def _alias(package_dir: Path) -> str:
    """A top-level name for a package of the distribution, so that its relative imports resolve
    there and never to the grader's own package of the same name."""
    if package_dir not in _ALIASES:
        name = f"_published_{len(_ALIASES)}"
        spec = importlib.util.spec_from_file_location(name, package_dir / "__init__.py",
                                                      submodule_search_locations=[str(package_dir)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        _ALIASES[package_dir] = name
    return _ALIASES[package_dir]


def load(source: Source, index: int, problems: list[str]) -> dict[str, Any]:
    """The functions and classes ``source`` defines (name -> object), its definitions run (each that
    cannot run noted in ``problems``)."""
    tree = definitions(source.code)
    if tree is None or not tree.body:
        return {}
    if source.package is not None:
        dotted, top = source.package
        package = _alias(top)
        inner = dotted.split(".", 1)[1] if "." in dotted else ""
        module_name = f"{package}.{inner}"
        parent = module_name.rsplit(".", 1)[0]
    else:
        module_name, parent = f"_published_source_{index}", None
    module = types.ModuleType(module_name)
    module.__dict__.update(__file__=source.name, __package__=parent, __builtins__=__builtins__)
    sys.modules.setdefault(module_name, module)
    added = str(source.path_dir) if source.path_dir else None
    if added:
        sys.path.insert(0, added)
    failed = []
    try:
        with _Limit(LOAD_SECONDS):
            for node in tree.body:  # one at a time: a definition that needs what was left out loses itself only
                try:
                    exec(compile(ast.Module([node], type_ignores=[]), source.name, "exec"),  # noqa: S102 - sandboxed
                         module.__dict__)
                except Exception as error:  # noqa: BLE001 - code students get that does not run here
                    failed.append(f"line {node.lineno}: {type(error).__name__}: {error}")
    finally:
        if added and added in sys.path:
            sys.path.remove(added)
    if failed:
        problems.append(f"{source.name}: {len(failed)} definitions not run ({failed[0]})"[:300])
    def defined_here(value: Any) -> bool:
        if isinstance(value, types.FunctionType):
            return value.__code__.co_filename == source.name
        return isinstance(value, type) and value.__module__ == module_name

    return {name: value for name, value in vars(module).items() if defined_here(value)}


class _Captured(Exception):
    def __init__(self, args: tuple, kwargs: dict):
        super().__init__()
        self.call = (args, kwargs)


def _capture(*args, **kwargs):
    raise _Captured(args, kwargs)


def first_call(check, case: dict) -> tuple[tuple, dict] | None:
    """The arguments a check's call gives the student's object first (a class: its constructor's),
    or None where the check looks at the object before calling it."""
    try:
        check.call(_capture, check.build(case), check.spec(case))
    except _Captured as captured:
        return captured.call
    except Exception:  # noqa: BLE001 - the call needs more than a callable
        return None
    return None


def _like(args: tuple, kwargs: dict, floating: bool):
    import torch

    tensors = [v for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor)]
    return next((t for t in tensors if t.is_floating_point() == floating), None)


def _cast(value: Any, args: tuple, kwargs: dict) -> Any:
    """Tensors returned cast to the inputs' dtype and device (floating to floating, integer to integer)."""
    import torch

    if isinstance(value, torch.Tensor) and value.dtype != torch.bool:
        like = _like(args, kwargs, value.is_floating_point())
        return value.to(like.device, like.dtype) if like is not None else value
    if isinstance(value, (tuple, list)):
        return type(value)(_cast(v, args, kwargs) for v in value)
    return value


def _listed(value: Any) -> Any:
    return [value] if isinstance(value, int) and not isinstance(value, bool) else value


def adapters(n_args: int) -> list[tuple[str, Callable[[tuple, dict], tuple[tuple, dict]]]]:
    """(how, what it does to a call's arguments): as given, the positional ones in every other order
    (the first four kept in place beyond three), integers as one-item lists, device= added."""
    found = [("as the check calls it", lambda a, k: (a, k))]
    orders = itertools.permutations(range(n_args)) if n_args <= 3 else [tuple(reversed(range(n_args)))]
    for order in orders:
        if list(order) != list(range(n_args)):
            found.append((f"with its arguments in the order {order}", lambda a, k, o=order: (tuple(a[i] for i in o), k)))
    found.append(("with integers as one-item lists", lambda a, k: (tuple(_listed(v) for v in a),
                                                                 {n: _listed(v) for n, v in k.items()})))

    def with_device(a, k):
        like = _like(a, k, True)
        like = _like(a, k, False) if like is None else like
        return a, ({**k, "device": like.device} if like is not None else k)
    found.append(("with device= the inputs' device", with_device))
    return found


def _binds(candidate: Any, call: tuple[tuple, dict]) -> bool:
    try:
        inspect.signature(candidate).bind(*call[0], **call[1])
    except (TypeError, ValueError):
        return False
    return True


def _keywords_taken(candidate: Callable) -> Callable:
    """``candidate`` called with only the keyword arguments it takes: a student's wrapper drops a
    ``causal=`` its published function has no use for."""
    try:
        parameters = inspect.signature(candidate).parameters
    except (TypeError, ValueError):
        return candidate
    if any(p.kind == p.VAR_KEYWORD for p in parameters.values()):
        return candidate

    @functools.wraps(candidate)
    def taking(*args, **kwargs):
        return candidate(*args, **{n: v for n, v in kwargs.items() if n in parameters})
    taking.__signature__ = inspect.signature(candidate).replace(parameters=[
        *parameters.values(), inspect.Parameter("_dropped_keywords", inspect.Parameter.VAR_KEYWORD)])
    return taking


def _adapted(candidate: Callable, change: Callable) -> Callable:
    def student(*args, **kwargs):
        given, named = change(args, kwargs)
        return _cast(candidate(*given, **named), args, kwargs)
    return student


def _stacked(results: list, lead: tuple[int, ...]) -> Any:
    """The results of one call per slice, put back in the slices' places (tuples element by element)."""
    import torch

    if isinstance(results[0], (tuple, list)):
        return type(results[0])(_stacked(list(part), lead) for part in zip(*results))
    return torch.stack([torch.as_tensor(r) for r in results]).reshape(*lead, *torch.as_tensor(results[0]).shape)


def _is_causal(kwargs: dict) -> bool:
    return any(bool(kwargs.get(name)) for name in ("causal", "is_causal"))


def _per_slice(candidate: Callable, core: int, causal_rows: bool = False, finish: Callable | None = None) -> Callable:
    """``candidate`` called once per slice of the last ``core`` dimensions of the tensor arguments
    that share the first one's leading dimensions (a head of (B, H, L, E), a row of (..., N)); with
    ``causal_rows``, where the call asks for causal attention, once per query row i over the rows
    0..i of the other tensors (its causal flag dropped); ``finish(result, inputs)`` turns each
    slice's result into the answer."""
    import torch

    def student(*args, **kwargs):
        sliced = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.dim() > core]
        if not sliced:
            raise TypeError("no tensor argument to loop over")
        lead = tuple(args[sliced[0]].shape[:-core])
        sliced = [i for i in sliced if tuple(args[i].shape[:-core]) == lead]
        by_rows = causal_rows and core == 2 and _is_causal(kwargs)
        named = {n: v for n, v in kwargs.items() if n not in ("causal", "is_causal")} if by_rows else kwargs
        results = []
        for index in itertools.product(*map(range, lead)):
            given = [a[index] if i in sliced else a for i, a in enumerate(args)]
            if by_rows:
                rows = []
                for row in range(len(given[sliced[0]])):
                    prefix = [a[row:row + 1] if i == sliced[0] else a[:row + 1] if i in sliced else a
                              for i, a in enumerate(given)]
                    rows.append(candidate(*prefix, **named))
                result = _stacked(rows, (len(rows),))
                result = result.flatten(0, 1) if isinstance(result, torch.Tensor) else result
            else:
                result = candidate(*given, **named)
            results.append(finish(result, given[sliced[0]]) if finish else result)
        return _cast(_stacked(results, lead), args, kwargs)
    return student


def _softmax_of_statistics(result: Any, x: Any) -> Any:
    """A row's (maximum m, sum l of exp(x - m)) made its softmax, as a student's line would."""
    import torch

    m, l = result
    return torch.exp(x - m) / l


def loops(candidate: Callable) -> list[tuple[str, Callable]]:
    """(how, the student's function) for the loops a student writes around a published function."""
    return [("once per head (the last two dimensions)", _per_slice(candidate, 2)),
            ("once per head and, for causal attention, once per query row over keys 0..i",
             _per_slice(candidate, 2, causal_rows=True)),
            ("once per row (the last dimension)", _per_slice(candidate, 1)),
            ("once per row, its (maximum, sum) made the softmax exp(x - m) / l",
             _per_slice(candidate, 1, finish=_softmax_of_statistics))]


class _DecodingModel:
    """The check's model as a published decoder's method expects its ``self``: ``encode`` passes the
    source through, ``decode`` calls the model on it and the tokens so far, anything else is the
    model's (a student's four-line wrapper around a book's decoding loop)."""

    def __init__(self, model: Any):
        self._model = model

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def __call__(self, *args, **kwargs):
        return self._model(*args, **kwargs)

    def encode(self, src):
        return src, None

    def decode(self, tgt_in, memory, *_):
        return self._model(memory, tgt_in)


def _decoding(method: Callable) -> Callable:
    def student(model, *args, **kwargs):
        return method(_DecodingModel(model), *args, **kwargs)
    return student


def methods(found: dict[str, Any]) -> dict[str, Callable]:
    """The public methods of the classes in ``found``, as functions named ``Class.method``: a
    decoding loop a class publishes is a function its ``self`` can be given to."""
    return {f"{name}.{attr}": value for name, cls in found.items() if isinstance(cls, type)
            for attr, value in vars(cls).items() if isinstance(value, types.FunctionType) and not attr.startswith("_")}


CONSTRUCTOR_FILLERS = (None, 1, 2, -2, 64)  # what a student's default argument gives a published class


def _with_defaults(cls: type, call: tuple[tuple, dict]) -> list[tuple[str, type]]:
    """(how, a subclass) of a published class whose constructor needs arguments the check does not
    give (at most two), each given a small default, as a student's subclass or wrapper would."""
    try:
        signature = inspect.signature(cls)
        bound = signature.bind_partial(*call[0], **call[1])
    except (TypeError, ValueError):
        return []
    missing = [name for name, p in signature.parameters.items() if name not in bound.arguments
               and p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if not missing or len(missing) > 2:
        return []
    found = []
    for values in itertools.product(CONSTRUCTOR_FILLERS, repeat=len(missing)):
        defaults = dict(zip(missing, values))
        try:
            found.append((f"with the default arguments {defaults}", _defaulted(cls, defaults)))
        except TypeError:  # a class that cannot be subclassed
            return []
    return found


def _defaulted(cls: type, defaults: dict) -> type:
    class Defaulted(cls):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**defaults, **kwargs})
    Defaulted.__name__ = Defaulted.__qualname__ = cls.__name__
    return Defaulted


_BUILT: dict[tuple[int, str], Any] = {}


def _inputs(check, case: dict):
    """A case's inputs, built once (the decoders' weights take a while) and copied for each trial."""
    key = (id(check), repr(sorted((str(k), repr(v)) for k, v in case.items())))
    if key not in _BUILT:
        _BUILT[key] = check.build(case)
    return copy.deepcopy(_BUILT[key])


def _most_it_can_earn(check, student: Any, calls: list[dict]) -> float:
    """The points ``student`` could earn at most: a case that raises earns none. Called plainly
    (no watch of forbidden calls, which only takes points away), it stops as soon as the cases
    that raise leave no more than LEAK_SHARE of the points: most candidates never return."""
    from attention_checks.core import quiet

    total = sum(call["points"] for call in calls)
    most = total
    for call in calls:
        for case in call["cases"]:
            try:
                with quiet(), _Limit(CASE_SECONDS):
                    check.call(student, _inputs(check, case), check.spec(case))
            except (Exception, TimeUp):  # noqa: BLE001 - the candidate's failure, or a case it is too slow for
                most -= call["points"] / len(call["cases"])
                if most <= LEAK_SHARE * total:
                    return most
    return most


def trial(check, student: Any, calls: list[dict]) -> tuple[float, float]:
    """(points earned, points) of ``student`` as ``check``'s graded name on its hidden calls, as the
    grader judges them (no run on the meta device: it can only take points away). Stops once the
    calls left cannot bring it past LEAK_SHARE; a call none of whose cases returns is not judged."""
    import torch

    from attention_checks.answers.judging import REFERENCES, judge
    from attention_checks.core import ForbiddenCalls
    from attention_checks.probe import probe

    earned, total = 0.0, sum(call["points"] for call in calls)
    if _most_it_can_earn(check, student, calls) <= LEAK_SHARE * total:
        return 0.0, total
    for index, call in enumerate(calls):
        torch.manual_seed(0)
        guard = ForbiddenCalls(check.forbidden)
        try:
            with _Limit(CASE_SECONDS * len(call["cases"])):
                outcomes = [probe(check, student, _inputs(check, case), check.spec(case), guard)
                            for case in call["cases"]]
        except TimeUp:  # this call earns nothing; the others keep their points
            outcomes = []
        if any(outcome.error is None for outcome in outcomes):
            earned += judge(check, call["cases"], outcomes, points=call["points"], forbidden=guard.seen,
                            devices=["cpu"] * len(outcomes), source=REFERENCES).score
        left = sum(later["points"] for later in calls[index + 1:])
        if earned + left <= LEAK_SHARE * total:
            break
    return earned, total


def _first_argument(*args, **kwargs):
    """A do-nothing answer: its first argument back, unchanged."""
    return args[0] if args else next(iter(kwargs.values()), None)


_FREE: dict[str, float] = {}


def leak_bar(check, calls: list[dict]) -> float:
    """The points past which a piece is a leak: more than LEAK_SHARE of those a do-nothing answer
    (its first argument back) does not already earn. Where the cases give such an answer points
    (apply_rope's identity at position 0), any function that returns its input would earn them."""
    total = sum(call["points"] for call in calls)
    if check.kind == "class":
        return LEAK_SHARE * total
    if check.name not in _FREE:
        try:
            _FREE[check.name] = min(trial(check, _first_argument, calls)[0], total)
        except Exception:  # noqa: BLE001 - a do-nothing answer that cannot even return earns nothing
            _FREE[check.name] = 0.0
    return _FREE[check.name] + LEAK_SHARE * (total - _FREE[check.name])


def scan_here(folder: Path, graded: dict[str, list[dict]]) -> FunctionalReport:
    """The scan itself (in the child process)."""
    from attention_checks import registry

    report = FunctionalReport()
    checks = {check.name: check for check in registry.load_all().values() if check.name in graded}
    calls = {name: first_call(check, graded[name][0]["cases"][0]) for name, check in checks.items()}
    seen: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="functional-wheels-") as unpacked:
        for index, source in enumerate(sources(folder, Path(unpacked))):
            digest = hashlib.sha256(source.code.encode()).hexdigest()
            if digest in seen:
                continue
            seen.add(digest)
            report.sources += 1
            try:
                found = load(source, index, report.problems)
            except (Exception, TimeUp) as error:  # noqa: BLE001 - code students get that does not load here
                report.problems.append(f"{source.name}: not loaded ({type(error).__name__}: {error})"[:300])
                continue
            found.update(methods(found))
            report.candidates += len(found)
            for name, candidate in sorted(found.items()):
                report.earned += _try(report, source.name, name, candidate, checks, calls, graded)
    return report


def _try(report: FunctionalReport, file: str, name: str, candidate: Any, checks: dict, calls: dict,
         graded: dict) -> list[Earned]:
    """The graded names ``candidate`` earns the points of (the best adapter for each)."""
    earned = []
    for graded_name, check in sorted(checks.items()):
        if (check.kind == "class") != isinstance(candidate, type):
            continue
        call = calls[graded_name]
        if check.kind == "class":
            tries = ([("as the check calls it", candidate)] if call is None or _binds(candidate, call)
                     else _with_defaults(candidate, call))
        else:
            taking = _keywords_taken(candidate)
            tries = [(how, _adapted(taking, change)) for how, change in adapters(len(call[0]) if call else 0)
                     if call is None or _binds(taking, change(*call))]
            tries += [(how, student) for how, student in loops(taking) if call is None or _binds(taking, call)]
            if "." in name and (call is None or _binds(taking, call)):  # a method: its self given the check's model
                tries.append(("as a method whose self is the check's model, its encode and decode made of the "
                              "model's call", _decoding(taking)))
        best = None
        for how, student in tries:
            report.trials += 1
            try:
                points, of = trial(check, student, graded[graded_name])  # each case under its time limit
            except Exception:  # noqa: BLE001 - a trial that stops earns nothing
                continue
            if points > leak_bar(check, graded[graded_name]) and (best is None or points > best.points):
                best = Earned(file, name, graded_name, round(points, 2), of, how)
        if best is not None:
            earned.append(best)
    return earned


def main(job_path: str) -> int:
    job = json.loads(Path(job_path).read_text(encoding="utf-8"))
    sys.path.insert(0, str(REPO_ROOT))
    report = scan_here(Path(job["folder"]), published.decode(job["graded"], {}))
    Path(job["report"]).write_text(json.dumps(asdict(report)), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
