"""What graded code may use (attention_checks/allowlist.py, issue 58): every route of the fifth
round's hostile notebooks is outside the allowlist, each beside an honest twin that is not; every
model solution and every correct corpus student stays inside; the grader reads it from the
source (SourceScanner.outside_allowlist) and a student's own notebook says the same."""
import ast
import textwrap

import pytest
from IPython.core.inputtransformer2 import TransformerManager

from attention_checks.allowlist import NAMES_FILE, OUTSIDE, Reader, computed_names
from autograder.grading.scanner import SourceScanner, StudentObject
from autograder.layout import find_assignments
from classroom import REPO, load_corpus, notebook_name, reference_code

TRANSFORM = TransformerManager().transform_cell


def outside(graded: str, scratch: str = "") -> list[str]:
    """What ``graded`` (code a graded name reaches) uses outside the allowlist, and what
    ``scratch`` (a cell of the student's that is not graded) uses that no cell may."""
    trees = [ast.parse(TRANSFORM(textwrap.dedent(graded)))]
    extra = [ast.parse(TRANSFORM(textwrap.dedent(scratch)))] if scratch else []
    reader = Reader(trees + extra)
    return [use.what for use in reader.within(trees[0])] + [use.what for use in reader.anywhere()]


# (the route, code that takes it, its honest twin): each route of issue 58, and a few more of their kind
ROUTES = [
    ("PyTorch's mode switch, private", "with torch._C.DisableTorchFunction():\n    y = x.exp()",
     "with torch.no_grad():\n    y = x.exp()"),
    ("PyTorch's mode switch, public", "with torch.DisableTorchFunctionSubclass():\n    y = x.exp()",
     "with torch.inference_mode():\n    y = x.exp()"),
    ("a dispatch-key guard", "guard = torch.ExcludeDispatchKeyGuard", "guard = torch.enable_grad"),
    ("the function-mode state", "mode = torch.overrides.TorchFunctionMode", "mode = torch.nn.functional.relu"),
    ("utilities that disable dispatch", "from torch.utils._python_dispatch import _disable_current_modes",
     "from torch.utils.flop_counter import FlopCounterMode"),
    ("a name decoded at run time", "f = getattr(F, bytes([115, 111]).decode() + 'ftmax')",
     "f = getattr(F, 'relu')"),
    ("a name folded from parts", "f = getattr(torch, ''.join(['e', 'xp']))", "f = getattr(torch, 'exp')"),
    ("getattr handed on", "f = functools.reduce(getattr, ['nn', 'functional'], torch)", "f = functools.reduce(max, [1, 2])"),
    ("getattr by another name", "import operator\nf = operator.attrgetter('soft' + 'max')(F)",
     "import operator\nf = operator.mul(x, 2)"),
    ("a method called by name", "from operator import methodcaller\ny = methodcaller('exp')(x)",
     "from operator import itemgetter\ny = itemgetter(0)(x)"),
    ("a module's namespace", "f = vars(F)['relu']", "f = F.relu"),
    ("a module's __dict__", "f = F.__dict__['relu']", "f = F.relu"),
    ("a frame's globals", "g = (i for i in [1])\nf = g.gi_frame.f_globals", "g = (i for i in [1])\nf = next(g)"),
    ("an object's class", "t = x.__class__", "t = type(x)"),
    ("a named tuple's API read off a module", "f = torch._asdict", "f = h._asdict()"),
    ("a class's __init__ as a value", "f = torch.Tensor.__init__", "nn.Module.__init__(self)"),
    ("every module by name, read as a method", "m = sys.modules.get('torch')", "m = list(self.modules())"),
    ("a module's submodules kept as a value", "f = self.modules", "n = len(list(self.modules()))"),
    ("a file on a RAM disk", "open('/dev/shm/scores', 'wb').write(b'')", "print('scores', file=sys.stderr)"),
    ("numpy's files", "np.save('/dev/shm/s.npy', x.numpy())", "y = np.exp(x.numpy())"),
    ("a tensor written to a file", "x.numpy().tofile('/dev/shm/s')", "y = x.numpy().sum()"),
    ("torch's files", "torch.save(x, '/dev/shm/s.pt')", "y = torch.stack([x, x])"),
    ("shared memory", "x.share_memory_()", "x.clone()"),
    ("a memory map", "import mmap", "import math"),
    ("the interpreter's hooks", "sys.setprofile(None)", "print(x, file=sys.stdout)"),
    ("every module by name", "m = sys.modules['torch']", "m = sys.stderr"),
    ("a module as a value", "s = sys\nw = s.stderr", "w = sys.stderr"),
    ("code given as text", "y = eval('x + 1')", "y = x + 1"),
    ("every global", "y = globals()['x']", "y = x"),
    ("an import by name", "m = __import__('torch')", "import torch"),
    ("a thread", "import threading", "import itertools"),
    ("a process", "import subprocess", "import collections"),
    ("ctypes", "import ctypes", "import dataclasses"),
    ("the import system", "import importlib", "import copy"),
    ("PyTorch's operators by name", "f = torch.ops.aten.exp", "f = torch.exp"),
    ("a compiler", "f = torch.compile(g)", "f = torch.no_grad()(g)"),
    ("PyTorch's own private implementation", "f = torch._refs.exp", "f = torch.special.expit"),
    ("IPython's shell", "get_ipython().run_line_magic('run', 'x.py')", "y = x"),
    ("IPython's history", "y = _ih[-1]", "y = _"),
]


@pytest.mark.parametrize("route, hostile, honest", ROUTES, ids=[r[0] for r in ROUTES])
def test_each_route_is_outside_and_its_honest_twin_inside(route, hostile, honest):
    header = "import functools\nimport sys\nimport torch\nimport torch.nn.functional as F\nimport numpy as np\n"
    assert outside(header + "def f(x, g=None):\n" + textwrap.indent(hostile, "    ")), route
    assert outside(header + "def f(x, g=None):\n" + textwrap.indent(honest, "    ")) == [], route


@pytest.mark.parametrize("scratch", [
    "import signal\nsignal.signal(signal.SIGALRM, lambda *a: None)\n",
    "import threading\nthreading.Thread(target=print).start()\n",
    "exec('import signal')\n",
    "%time eval('1 + 1')\n",
    "%run helper.py\n",
    "!rm -rf /tmp/x\n",
    "torch._C?\n",
    "%config InlineBackend.figure_format = __import__('os').getcwd()\n",
    "%config InteractiveShell.ast_node_interactivity = 'all'\n",
    "import sys\nsys.settrace(None)\n",
    # what writes files: one named like a module beside the notebook is code a later import runs unscanned
    "import os\nos.getcwd()\n",
    "from pathlib import Path\nPath('heapq.py').write_text('...')\n",
    "torch.save({}, 'x.pt')\n",
    "from torch.testing._internal import common_utils\n",
])
def test_a_scratch_cell_that_reaches_past_the_allowlist_counts(scratch):
    """A cell that is not graded runs in the process that grades the others: what no cell may use
    (signal handlers, threads, code given as text, the interpreter's hooks, shell commands)."""
    assert outside("def f(x):\n    return x\n", scratch)


@pytest.mark.parametrize("scratch", [
    "import matplotlib.pyplot as plt\nplt.plot([1, 2])\n",
    "import time\nt0 = time.time()\n%time y = f(x)\n",
    "%timeit -n 3 -r 2 f(x)\n",
    "print(torch.softmax(x, -1))\nhelp(f)\nprint(f.__doc__)\n",
    "import attention_checks\nhelp(attention_checks)\n",
    "%matplotlib inline\n",
    "f?\ntorch.softmax??\n",
    "%config InlineBackend.figure_format = 'retina'\n",
    "print(sum(1 for m in model.modules() if isinstance(m, nn.Linear)))\n",
    # comparing with PyTorch's and printing (a correct notebook once lost every point to these)
    "torch.testing.assert_close(f(x), torch.softmax(x, -1))\n",
    "from torch.testing import assert_close\nassert_close(f(x), x)\n",
    "import json\nprint(json.dumps({'loss': 0.5}, indent=1))\n",
])
def test_a_scratch_cell_may_plot_time_and_read_documentation(scratch):
    assert outside("def f(x):\n    return x\n", scratch) == []


def test_the_students_own_names_and_modules_attributes_are_inside():
    code = """
    class Layer(nn.Module):
        def __init__(self, d):
            super().__init__()
            self._cache = None
            self.proj = nn.Linear(d, d)
            self.register_buffer("scale", torch.ones(d))
            for i in range(2):
                setattr(self, f"norm{i}", nn.LayerNorm(d))

        def forward(self, x):
            self._cache = x
            y = self.proj(x) * self.scale + self.proj.bias + self.training
            return getattr(self, f"norm{0}")(y).max(dim=-1).values
    """
    assert outside(code) == []
    # a private name the student mangles is theirs; a dunder the student assigns is not
    mangled = "class Cache:\n    def __init__(self):\n        self.__keys = None\n\n    def __len__(self):\n" \
              "        return 0 if self.__keys is None else self.__keys.shape[-2]\n"
    assert outside(mangled) == []
    assert outside("def f(x, m):\n    m.__dict__ = {}\n    return m.__dict__\n")
    # the same names on PyTorch's own objects are not the student's
    assert set(outside("def f(m):\n    return m._parameters\n")) == {"m._parameters"}
    assert outside("def f(self):\n    self = torch\n    return getattr(self, 'soft' + 'max')\n")


# Ordinary Python that careful students write in graded code, none of it a way past the allowlist
ORDINARY = {
    "annotations": "from __future__ import annotations\nfrom typing import Optional, TypeVar\nT = TypeVar('T')\n"
                   "def f(x: torch.Tensor, m: Optional[torch.Tensor] = None) -> torch.Tensor:\n    return x",
    "a beam as a heap": "import heapq\ndef f(beams):\n    return heapq.nlargest(2, beams, key=lambda b: b[0])",
    "an abstract base and an enum": "from abc import ABC, abstractmethod\nfrom enum import Enum\n"
                                    "class Kind(Enum):\n    ROPE = 1\nclass Base(ABC, nn.Module):\n    @abstractmethod\n"
                                    "    def forward(self, x):\n        ...",
    "a context": "import contextlib\ndef f(x, grad):\n    with (contextlib.nullcontext() if grad else torch.no_grad()):\n"
                 "        return x * 2",
    "where the model runs": "def f(x):\n    device = 'cuda' if torch.cuda.is_available() else "
                            "('mps' if torch.backends.mps.is_available() else 'cpu')\n    return x.to(device)",
    "a timed, quiet training loop": "import time, warnings\nfrom tqdm.auto import trange\ndef train(step, n):\n"
                                    "    start = time.perf_counter()\n    with warnings.catch_warnings():\n"
                                    "        warnings.simplefilter('ignore')\n        losses = [step() for _ in trange(n)]\n"
                                    "    return losses, time.perf_counter() - start",
    "a clipped training step": "def step(model, loss, optimizer):\n    loss.backward()\n"
                                "    nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n    optimizer.step()",
    "statistics and randomness": "import random, statistics\ndef f(xs):\n    return statistics.mean(xs) + random.random() * 0",
    "an error that names a type": "def f(x):\n    if not torch.is_tensor(x):\n"
                                  "        raise TypeError(f'expected a tensor, got {type(x).__name__}')\n    return x",
    "an old-style base init, weights set per submodule": "class M(nn.Module):\n    def __init__(self, d):\n"
                                                         "        nn.Module.__init__(self)\n        self.proj = nn.Linear(d, d)\n"
                                                         "        for m in self.modules():\n"
                                                         "            if isinstance(m, nn.Linear):\n"
                                                         "                nn.init.zeros_(m.bias)",
    "a beam of named tuples": "from typing import NamedTuple\nclass Hypothesis(NamedTuple):\n    tokens: list\n"
                              "    score: float\ndef f(h, token, logp):\n"
                              "    return h._replace(tokens=h.tokens + [token], score=h.score + logp)._asdict()",
    "a cached helper": "from functools import lru_cache\n@lru_cache(maxsize=None)\ndef table(n):\n    return n\n"
                       "def f(x):\n    table.cache_clear()\n    return x",
}


@pytest.mark.parametrize("code", ORDINARY.values(), ids=ORDINARY.keys())
def test_ordinary_python_is_inside(code):
    assert outside(code) == []


def test_a_module_reached_by_its_path_lends_its_name_to_nothing_else():
    """torch.nn.utils allows its clipping functions by their path only: "utils" is no attribute of
    other values, and its other modules stay outside."""
    assert outside("def f(x):\n    return x.utils.data\n") == ["x.utils"]
    assert outside("from torch.nn.utils import prune\n")


def test_the_shipped_names_are_what_this_pytorch_gives():
    """attention_checks/allowed_names.json is made by `python -m attention_checks.allowlist`:
    run it again after changing IMPORTABLE, DENIED or PyTorch."""
    import json

    assert json.loads(NAMES_FILE.read_text()) == computed_names()


def _course_cells(assignment: str) -> list[str]:
    import nbformat

    notebook = nbformat.read(REPO / "solutions" / assignment / f"{notebook_name(assignment)}.ipynb", 4)
    return [c.source for c in notebook.cells
            if c.cell_type == "code" and not c.metadata.get("nbgrader", {}).get("solution")]


@pytest.mark.parametrize("assignment", find_assignments(REPO / "solutions"))
def test_model_solutions_and_correct_students_stay_inside(assignment):
    """Every graded name of the model solution and of every corpus student who earns full marks
    (correct code written in unusual ways, scratch cells that plot, print, time and compare with
    PyTorch's) uses nothing outside the allowlist, as the grader reads it."""
    reference, course = reference_code(assignment), _course_cells(assignment)
    students = [("model solution", reference, [])] + [
        (entry.name, {**reference, **entry.cells}, [p for _, kind, p in entry.added if kind == "new"])
        for entry in load_corpus(assignment, cli=True) if entry.expect == "full"]
    for name, cells, added in students:
        scanner = SourceScanner([*cells.values(), *added], course)
        for graded in cells:
            for obj in _defined(cells[graded]):
                assert scanner.outside_allowlist(StudentObject(obj)) == [], (name, obj)


def _defined(source: str) -> list[str]:
    try:
        tree = ast.parse(TRANSFORM(source))
    except SyntaxError:
        return []
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]


def test_the_grader_counts_what_a_graded_name_reaches_and_no_other():
    student = [
        "def helper(x):\n    return torch.ops.aten.exp(x)\n",
        "def softmax(x, dim=-1):\n    e = helper(x - x.max(dim=dim, keepdim=True).values)\n"
        "    return e / e.sum(dim=dim, keepdim=True)\n",
        "def unrelated(x):\n    return torch.utils.data.DataLoader(x)\n",
        "import matplotlib.pyplot as plt\nplt.plot(softmax(torch.zeros(3)))\n",
    ]
    scanner = SourceScanner(student)
    found = scanner.outside_allowlist(StudentObject("softmax"))
    assert found == [OUTSIDE + "torch.ops"] and found[0].line == "return torch.ops.aten.exp(x)"
    assert scanner.outside_allowlist(StudentObject("unrelated")) == [OUTSIDE + "torch.utils.data"]


def test_a_scratch_cells_signal_handler_counts_against_every_graded_name():
    student = ["def softmax(x, dim=-1):\n    return x\n",
               "import signal\nsignal.signal(signal.SIGALRM, lambda *a: None)\n"]
    found = SourceScanner(student).outside_allowlist(StudentObject("softmax"))
    assert found == [OUTSIDE + "import signal"]


def test_a_word_in_a_string_is_data():
    """Issue 58: a correct softmax whose cell holds the word "softmax" in strings loses nothing."""
    code = ("ERRORS = {'softmax': 'the softmax of an empty row'}\n"
            "def softmax(x, dim=-1):\n"
            "    if x.shape[dim] == 0:\n"
            "        raise ValueError(ERRORS['softmax'])\n"
            "    e = (x - x.max(dim=dim, keepdim=True).values).exp()\n"
            "    return e / e.sum(dim=dim, keepdim=True)\n")
    assert SourceScanner([code]).outside_allowlist(StudentObject("softmax")) == []


def test_the_students_notebook_says_the_same_before_submission():
    """In the student's own kernel (IPython keeps each cell's source), a visible test of a graded
    name that uses something outside the allowlist says what and where, and earns nothing."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_cell("import torch\nfrom attention_checks.softmax_scaling import check_softmax\n")
    shell.run_cell("def helper(x):\n    with torch._C.DisableTorchFunction():\n        return x.exp()\n\n"
                   "def softmax(x, dim=-1):\n    e = helper(x - x.max(dim=dim, keepdim=True).values)\n"
                   "    return e / e.sum(dim=dim, keepdim=True)\n")
    result = shell.run_cell("check_softmax(softmax, points=2, cases=[dict()])\n")
    assert "uses torch._C in `with torch._C.DisableTorchFunction():`" in str(result.error_in_exec)
    assert "may not use (0 / 2 points)" in str(result.error_in_exec)
    shell.run_cell("def softmax(x, dim=-1):\n    e = (x - x.max(dim=dim, keepdim=True).values).exp()\n"
                   "    return e / e.sum(dim=dim, keepdim=True)\n")
    assert shell.run_cell("check_softmax(softmax, points=2, cases=[dict()])\n").error_in_exec is None


def test_a_decorated_function_is_read_from_its_own_cell():
    """@torch.no_grad() wraps the student's function in PyTorch's: the student's notebook reads the
    student's cell behind the wrapper (and never PyTorch's source, which imports inspect), so a
    correct decorated softmax passes and a decorated one outside the allowlist is still caught."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_cell("import torch\nfrom attention_checks.softmax_scaling import check_softmax\n")
    shell.run_cell("@torch.no_grad()\ndef softmax(x, dim=-1):\n    e = (x - x.amax(dim=dim, keepdim=True)).exp()\n"
                   "    return e / e.sum(dim=dim, keepdim=True)\n")
    assert shell.run_cell("check_softmax(softmax, points=2, cases=[dict()])\n").error_in_exec is None
    shell.run_cell("@torch.no_grad()\ndef softmax(x, dim=-1):\n    with torch._C.DisableTorchFunction():\n"
                   "        e = (x - x.amax(dim=dim, keepdim=True)).exp()\n"
                   "    return e / e.sum(dim=dim, keepdim=True)\n")
    error = shell.run_cell("check_softmax(softmax, points=2, cases=[dict()])\n").error_in_exec
    assert "uses torch._C in `with torch._C.DisableTorchFunction():`" in str(error)


def test_a_local_named_like_another_cells_function_is_not_that_function():
    """In the student's own notebook, a graded function's local variable that has the name of a
    function another cell defines (the course's plotting helper, which imports matplotlib) does
    not bring that cell in; a helper the function calls does."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_cell("import torch\nfrom attention_checks.softmax_scaling import check_softmax\n")
    shell.run_cell("import matplotlib.pyplot as plt\n\ndef shifted(x):\n    plt.plot(x)\n")
    shell.run_cell("def softmax(x, dim=-1):\n    shifted = (x - x.amax(dim=dim, keepdim=True)).exp()\n"
                   "    return shifted / shifted.sum(dim=dim, keepdim=True)\n")
    assert shell.run_cell("check_softmax(softmax, points=2, cases=[dict()])\n").error_in_exec is None
    shell.run_cell("def softmax(x, dim=-1):\n    e = (x - x.amax(dim=dim, keepdim=True)).exp()\n    shifted(e)\n"
                   "    return e / e.sum(dim=dim, keepdim=True)\n")
    error = shell.run_cell("check_softmax(softmax, points=2, cases=[dict()])\n").error_in_exec
    assert "uses import matplotlib.pyplot" in str(error)
