"""Reading the student's source for what the kernel could hide: forbidden calls that a
graded object can reach, and code that tampers with the course's checks.

The student's cells are one Python module (the kernel's namespace). ``SourceScanner``
resolves every name the way Python does (a function's parameters and locals, lambda and
comprehension variables and class bodies are scopes of their own; ``global`` and
``nonlocal`` are honoured), and follows, from the graded name, only what can flow into
it: the definitions and assignments of the names it uses, the values stored into them
(``d[k] = f``, ``obj.attr = f``, ``lst.append(f)``, ``setattr``), the arguments other
code passes to its functions when they keep them (in a global, a class, a mutable
default), values written through ``globals()``, ``builtins``, ``exec`` or ``%%writefile``. A student's scratch cell that only *uses* the graded function (a comparison
with PyTorch's, a plot) is never followed. In what is reached, a forbidden function counts
wherever it is named: an attribute (``torch.softmax``, ``nnf.softmax``, ``x.softmax``,
``torch.ops.aten._softmax``), an imported name, or a string used as a name (``getattr(torch,
"soft" + "max")``, folded from constants; ``vars(nn)["LayerNorm"]``; see ``_used_as_names``):
any other string is data (an error label, a dictionary's key), never a call. Code that runs only once at module level and merely
*calls* a forbidden function (``x = torch.softmax(y, 0)`` in a scratch cell whose ``x`` is
then passed to the student's function) produces data, not a way to call it, so it does
not count; a forbidden *class* counts even when called (its instance is the module).
"""
from __future__ import annotations

import ast
import functools
import re
from typing import Any, Callable, Iterable, Sequence

from IPython.core.inputtransformer2 import TransformerManager

import attention_checks
from attention_checks import registry
from attention_checks.allowlist import OUTSIDE, Reader
from attention_checks.core import ALWAYS_FORBIDDEN

COURSE_CHECKS = "attention_checks"
TOUCHES_CHECKS = "the course's own checks (attention_checks) from its code"
# Registering operator kernels with PyTorch changes what its own functions compute (F.sigmoid made
# a softmax, an operator of the notebook's own run by PyTorch's dispatcher), for every graded object:
# anywhere in the notebook, it counts against each of them, as touching the checks does. The names
# of the ways in: torch.library (Library, impl, custom_op), the dispatcher's own, and compiled
# operators (torch.ops.load_library, torch.utils.cpp_extension).
REGISTERS_OPERATORS = "operator kernels that the notebook registers with PyTorch (torch.library)"
REGISTRATION_NAMES = {"library", "_library", "custom_op", "_custom_op", "_custom_ops", "_dispatch_library",
                      "load_library", "cpp_extension"}

def _public_modules() -> set[str]:
    """The modules of the checks a notebook may import: each assignment's (found on disk as the
    registry finds them, whatever they import from each other) and ``submit``."""
    return {module.rsplit(".", 1)[-1] for module in registry.check_modules()} | {"submit"}


# The public face of the checks: what a student may import and read. The machinery
# (core, record's publish, the answers) is not in it: reaching it can forge records.
PUBLIC_MODULES = _public_modules()
PUBLIC_NAMES = set(attention_checks.__all__) | {"pick_device", "submit"}
READ_ONLY_ATTRIBUTES = {"__doc__", "__name__", "__qualname__", "__module__", "__all__", "__version__"}
READERS = {"help", "print", "dir", "repr", "str", "type", "id", "isinstance", "callable", "len", "hasattr",
           "sorted", "format", "display",  # builtins that read an object, and IPython's display
           "getdoc", "getsource", "getsourcelines", "getfile", "signature"}  # inspect's readers
# Namespaces through which code can bind or look up any name: a write through one may bind what
# the graded object uses; a read through one in the graded object may use any global.
DYNAMIC_NAMESPACES = {"globals", "locals", "vars", "builtins", "__builtins__", "__dict__", "sys.modules"}
CODE_RUNNERS = {"exec", "eval", "compile", "__import__"}  # builtins that run or import code given as a string
IDENTIFIER_PATH = re.compile(r"^[A-Za-z_][\w.:]*$")
# Where a string is used as a name (issue 58): the attribute, global, module or operator that these
# calls look up (a string anywhere else is data: an error label, a dictionary's key, a message).
NAME_LOOKUPS = {"getattr", "setattr", "hasattr", "delattr", "__getattribute__", "__getattr__", "__setattr__",
                "__delattr__", "attrgetter", "methodcaller", "import_module", "__import__", "resolve_name",
                "find_spec", "vars", "__getitem__", "get", "pop", "setdefault"}
# The containers a student makes: a lookup in one of them by a string is the student's own data
CONTAINER_MAKERS = {"dict", "list", "defaultdict", "OrderedDict", "Counter", "set", "tuple"}


class Finding(str):
    """A forbidden name the graded object can reach (the str itself), with ``line``: the
    student's line of code that reaches it, stripped, for the message."""

    line: str

    def __new__(cls, name: str, line: str = ""):
        finding = super().__new__(cls, name)
        finding.line = line
        return finding


class StudentObject:
    """Stands, in the grader's process, for a name the student's notebook defines."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"<the notebook's {self.name}>"


# --------------------------------------------------------------------------
# scopes: which definition each name refers to


class Scope:
    def __init__(self, node: ast.AST | None, parent: "Scope | None", kind: str):
        self.node, self.parent, self.kind = node, parent, kind  # kind: module, function, class, comprehension
        self.bound: set[str] = set()
        self.params: set[str] = set()
        self.declared_global: set[str] = set()
        self.declared_nonlocal: set[str] = set()
        self.star_imports: list[ast.ImportFrom] = []  # from m import *: may bind any name

    def __repr__(self) -> str:
        return f"<{self.kind} scope {getattr(self.node, 'name', '')}>"


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class _Binder(ast.NodeVisitor):
    """Pass 1: the scope of every node, and the names each scope binds."""

    def __init__(self, module: Scope, scope_of: dict[int, Scope]):
        self.scope, self.scope_of = module, scope_of

    def generic_visit(self, node):
        self.scope_of[id(node)] = self.scope
        super().generic_visit(node)

    def _visit_all(self, nodes: Iterable[ast.AST | None]):
        for node in nodes:
            if node is not None:
                self.visit(node)

    def _enter(self, node, kind: str, body: Iterable[ast.AST], params: Sequence[str] = ()):
        scope = Scope(node, self.scope, kind)
        scope.bound |= set(params)
        scope.params |= set(params)
        outer, self.scope = self.scope, scope
        self._visit_all(body)
        self.scope = outer

    def _arguments(self, args: ast.arguments) -> list[str]:
        every = args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]
        self._visit_all(args.defaults + [d for d in args.kw_defaults if d] + [a.annotation for a in every])
        return [a.arg for a in every]

    def visit_FunctionDef(self, node):
        self.scope_of[id(node)] = self.scope
        self.scope.bound.add(node.name)
        self._visit_all(node.decorator_list + [node.returns])
        self._enter(node, "function", node.body, self._arguments(node.args))

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        self.scope_of[id(node)] = self.scope
        self._enter(node, "function", [node.body], self._arguments(node.args))

    def visit_ClassDef(self, node):
        self.scope_of[id(node)] = self.scope
        self.scope.bound.add(node.name)
        self._visit_all(node.decorator_list + node.bases + [k.value for k in node.keywords])
        self._enter(node, "class", node.body)

    def _comprehension(self, node):
        self.scope_of[id(node)] = self.scope
        parts = [x for g in node.generators for x in (g.target, g.iter, *g.ifs)]
        self._enter(node, "comprehension", parts + ([node.key, node.value] if isinstance(node, ast.DictComp)
                                                     else [node.elt]))

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def visit_Name(self, node):
        self.scope_of[id(node)] = self.scope
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.scope.bound.add(node.id)

    def visit_NamedExpr(self, node):
        self.scope_of[id(node)] = self.scope
        self._visit_all([node.value])
        target = self.scope
        while target.kind == "comprehension":  # a walrus in a comprehension binds in the enclosing scope
            target = target.parent
        target.bound.add(node.target.id)
        self.scope_of[id(node.target)] = target

    def visit_Global(self, node):
        self.scope_of[id(node)] = self.scope
        self.scope.declared_global |= set(node.names)

    def visit_Nonlocal(self, node):
        self.scope_of[id(node)] = self.scope
        self.scope.declared_nonlocal |= set(node.names)

    def visit_alias(self, node):
        self.scope_of[id(node)] = self.scope
        if node.name == "*":
            return
        self.scope.bound.add(node.asname or node.name.split(".")[0])

    def visit_ImportFrom(self, node):
        self.scope_of[id(node)] = self.scope
        if any(a.name == "*" for a in node.names):
            self.scope.star_imports.append(node)
        self.generic_visit(node)

    def visit_ExceptHandler(self, node):
        if node.name:
            self.scope.bound.add(node.name)
        self.generic_visit(node)


def resolve(scope: Scope, name: str) -> Scope | None:
    """The scope whose binding of ``name`` a use in ``scope`` refers to (None: not the student's)."""
    start = scope
    if name in scope.declared_global:
        scope = _module(scope)
        return scope if name in scope.bound else None
    if name in scope.declared_nonlocal:
        scope = scope.parent
    while scope is not None:
        if name in scope.bound and (scope is start or scope.kind != "class"):
            if name in scope.declared_global:
                return resolve(scope, name)
            return scope
        scope = scope.parent
    return None


def _module(scope: Scope) -> Scope:
    while scope.parent is not None:
        scope = scope.parent
    return scope


Var = tuple  # (scope or None, name): a variable; None for a name the student's code never binds


# --------------------------------------------------------------------------
# strings built from constants: "soft" + "max", f"{a}max", "".join([...]), "xamtfos"[::-1]


def fold(node: ast.AST, depth: int = 0) -> str | None:
    """The string ``node`` always evaluates to, when it is built from constants only."""
    if depth > 20:
        return None
    again = lambda n: fold(n, depth + 1)  # noqa: E731
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = again(node.left), again(node.right)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        text, times = again(node.left), node.right
        if text is not None and isinstance(times, ast.Constant) and isinstance(times.value, int):
            return text * min(times.value, 10)
        return None
    if isinstance(node, ast.JoinedStr):
        parts = [again(v.value if isinstance(v, ast.FormattedValue) else v) for v in node.values]
        return "".join(parts) if all(p is not None for p in parts) else None
    if isinstance(node, ast.Subscript):
        text = again(node.value)
        if text is not None and isinstance(node.slice, ast.Slice):
            bounds = [b.value if isinstance(b, ast.Constant) else None for b in
                      (node.slice.lower, node.slice.upper, node.slice.step)]
            if all(b is None or isinstance(b, int) for b in bounds):
                return text[slice(*bounds)]
        return None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        owner = again(node.func.value)
        args = [again(a) for a in node.args]
        if owner is None:
            return None
        if node.func.attr == "join" and len(node.args) == 1 and isinstance(node.args[0], (ast.List, ast.Tuple)):
            items = [again(e) for e in node.args[0].elts]
            return owner.join(items) if all(i is not None for i in items) else None
        if node.func.attr in ("lower", "upper", "strip", "replace", "format", "removeprefix", "removesuffix") \
                and all(a is not None for a in args) and not node.keywords:
            try:
                return getattr(owner, node.func.attr)(*args)
            except (TypeError, ValueError, IndexError, KeyError):
                return None
    return None


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z_]\w*", text)


# --------------------------------------------------------------------------
# the scanner



class SourceScanner:
    """Finds the forbidden names a graded object can reach in the student's code, and
    whether that code tampers with the course's checks (which forfeits every check: a
    patched recorder could hide forbidden calls from the kernel's own detector)."""

    def __init__(self, sources: Sequence[str], course_sources: Sequence[str] = ()):
        self.module = Scope(None, None, "module")
        self.scope_of: dict[int, Scope] = {}
        self.lines_of: dict[int, list[str]] = {}  # id(node) -> the lines of its cell
        self.trees: list[ast.Module] = []
        transform = TransformerManager().transform_cell  # %magics and !shell lines -> Python
        for source in sources:
            try:
                code = transform(source)
                body = _python_cell_magic(code)
                if body is not None:  # %%time, %%capture, ...: the Python of the cell runs as any cell's
                    source, code = body, transform(body)
                tree = ast.parse(code)
            except (SyntaxError, ValueError):
                continue  # a cell that does not parse defines nothing
            binder = _Binder(self.module, self.scope_of)
            for statement in tree.body:
                binder.visit(statement)
            # the student's own lines where %magics kept the count; a %%cell magic became one line
            original = source.splitlines()
            lines = code.splitlines()
            lines = original if len(original) == len(lines) else [original[0]] if len(lines) == 1 else lines
            for node in ast.walk(tree):
                self.lines_of[id(node)] = lines
            self.trees.append(tree)
        self.docstrings = {id(n.body[0].value) for tree in self.trees for n in ast.walk(tree)
                           if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                           and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        self._index()
        self.named = self._used_as_names()
        self._checks_memo: dict[Var, bool] = {}
        # what uses() and persists() found: every test cell of a notebook asks again for the same
        # graded names, and the code does not change between them
        self._uses_memo: dict[tuple[str, tuple[str, ...]], list[Finding]] = {}
        self._persists_memo: dict[int, bool] = {}
        # what counts against every graded object, wherever it is in the notebook: its first line
        self.tampering = self._first_line(TOUCHES_CHECKS, self._tampers)
        self.registering = self._first_line(REGISTERS_OPERATORS, self._registers)
        # the allowlist (attention_checks.allowlist): the whole of it for the code a graded object
        # reaches (outside_allowlist), and what no cell may use for every cell, counted against
        # every graded object (it runs in the process that grades them all)
        self.allowlist = Reader(self.trees, _parsed(course_sources))
        anywhere = self.allowlist.anywhere()
        self.outside_anywhere = Finding(OUTSIDE + anywhere[0].what, self.line(anywhere[0].node)) if anywhere else None
        self._outside_memo: dict[str, list[Finding]] = {}
        self._reached: dict[str, list[ast.AST]] = {}  # graded name -> the code its walk read (_uses)
        self._within_memo: dict[int, list] = {}  # id(code) -> what it uses outside the allowlist

    def line(self, node: ast.AST) -> str:
        """The student's line of code where ``node`` starts, stripped."""
        lines, number = self.lines_of.get(id(node), []), getattr(node, "lineno", 0)
        return lines[number - 1].strip() if 0 < number <= len(lines) else ""

    def var(self, node: ast.AST, name: str) -> Var:
        """The variable ``name`` means where ``node`` is."""
        return (resolve(self.scope_of.get(id(node), self.module), name), name)

    # -- what flows into each variable -------------------------------------------------------

    def _index(self):
        # var -> [(node, how)]: how is "def" (a definition: all of it may run), "value" (an
        # expression whose value flows in) or "import" (an alias of an import statement)
        self.flows: dict[Var, list[tuple[ast.AST, str]]] = {}
        self.calls: dict[Var, list[ast.Call]] = {}  # calls of a variable: their arguments reach its parameters
        self.attribute_stores: dict[str, list[ast.AST]] = {}  # x.attr = value, setattr(x, "attr", value)
        self.bindings: dict[Var, list[ast.AST]] = {}  # name = value: what a name is bound to, and nothing else
        instance_stores: list[tuple[Var, str, ast.AST]] = []  # name.attr = value, decided once all is read
        self.dynamic: list[ast.AST] = []  # values written through globals(), builtins, sys.modules, exec, ...
        self.code_strings: set[int] = set()  # arguments of exec, eval, compile
        self.owner_of: dict[int, Var] = {}  # id(function node) -> the variable its calls go through
        self.import_of: dict[int, ast.AST] = {}  # id(alias) -> its import statement
        constructors: dict[int, Var] = {}
        for tree in self.trees:
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    var = self.var(node, node.name)
                    self._flow(var, node, "def")
                    self.owner_of[id(node)] = var
                    for item in node.body if isinstance(node, ast.ClassDef) else []:
                        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == "__init__":
                            constructors[id(item)] = var  # calling the class calls __init__
                elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in targets:
                        self._store(target, node.value, instance_stores)
                    if isinstance(node.value, ast.Lambda) and isinstance(targets[0], ast.Name):
                        self.owner_of[id(node.value)] = self.var(targets[0], targets[0].id)
                elif isinstance(node, ast.NamedExpr):
                    self._flow(self.var(node.target, node.target.id), node.value)
                    self.bindings.setdefault(self.var(node.target, node.target.id), []).append(node.value)
                elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                    self._store(node.target, node.iter)
                elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                    self._store(node.optional_vars, node.context_expr)
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    for alias in node.names:
                        self.import_of[id(alias)] = node
                        if alias.name != "*":
                            bound = alias.asname or (alias.name.split(".")[0] if isinstance(node, ast.Import)
                                                     else alias.name)
                            self._flow(self.var(alias, bound), alias, "import")
                elif isinstance(node, ast.Call):
                    self._call(node)
        self.owner_of.update(constructors)
        for var, attribute, value in instance_stores:
            if not self._fresh_instance(var):
                self.attribute_stores.setdefault(attribute, []).append(value)

    def _fresh_instance(self, var: Var) -> bool:
        """Whether a variable only ever holds a new object of one of the student's own plain classes
        (``mine = MultiHeadAttention(8, 2)``): a value stored in its attribute
        (``mine.out_proj = torch_mha.out_proj``, a scratch cell's comparison) then belongs to that object
        alone, and reaches graded code only through the variable itself (its flows), never through
        the attribute's name on the instances the grader makes."""
        bound = self.bindings.get(var, [])
        rebound = any(how in ("import", "def") for _, how in self.flows.get(var, []))
        return bool(bound) and not rebound and all(
            isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
            and self._plain_class(self.var(value.func, value.func.id), set()) for value in bound)

    def _plain_class(self, var: Var, seen: set) -> bool:
        """Whether ``var`` is bound only to one class the student defined whose calls make a new object
        each time: no decorator, metaclass, ``__new__`` or attribute hooks, and bases that are plain
        too where they are the student's (a base from an import is PyTorch's or Python's)."""
        if var in seen or var[0] is None:
            return False
        seen.add(var)
        flows = self.flows.get(var, [])
        classes = [node for node, how in flows if how == "def" and isinstance(node, ast.ClassDef)]
        if len(classes) != 1 or len(flows) != 1:
            return False
        cls = classes[0]
        hooks = {"__new__", "__setattr__", "__getattr__", "__getattribute__", "__init_subclass__", "__class__"}
        if cls.decorator_list or cls.keywords or any(
                isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Assign)) and (
                    getattr(item, "name", None) in hooks
                    or any(isinstance(t, ast.Name) and t.id in hooks for t in getattr(item, "targets", [])))
                for item in cls.body) or not all(_self_stays(method) for method in cls.body
                                                  if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef))):
            return False
        for base in cls.bases:
            if not isinstance(base, (ast.Name, ast.Attribute)):
                return False
            base_var = self.var(base, base.id) if isinstance(base, ast.Name) else None
            if base_var and base_var[0] is not None and not self.imported(base_var) \
                    and not self._plain_class(base_var, seen):
                return False
        return True

    def _flow(self, var: Var, node: ast.AST, how: str = "value"):
        self.flows.setdefault(var, []).append((node, how))

    def imported(self, var: Var) -> bool:
        """Whether a variable holds what an import bound (a module like nn): its methods
        (nn.ModuleList(x), torch.allclose(a, b)) make new objects, they do not keep x."""
        return any(how == "import" for _, how in self.flows.get(var, []))

    def _store(self, target: ast.AST, value: ast.AST, instance_stores: list | None = None):
        """``target = value``: a name bound, or an object changed (x.a = v, x[k] = v), or a namespace
        written. ``instance_stores``: where ``name.a = v`` goes until it is known whether ``name``
        holds a fresh instance of the student's own (``_fresh_instance``); else straight to the
        attribute's stores."""
        if isinstance(target, ast.Name):
            self._flow(self.var(target, target.id), value)
            self.bindings.setdefault(self.var(target, target.id), []).append(value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._store(element, value)
        elif isinstance(target, ast.Starred):
            self._store(target.value, value)
        elif isinstance(target, (ast.Attribute, ast.Subscript)):
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and instance_stores is not None:
                instance_stores.append((self.var(target.value, target.value.id), target.attr, value))
            elif isinstance(target, ast.Attribute):
                self.attribute_stores.setdefault(target.attr, []).append(value)
            for root in roots(target):
                self._flow(self.var(root, root.id), value)
            if _dynamic(target):
                self.dynamic.append(value)

    def _call(self, call: ast.Call):
        values = list(call.args) + [k.value for k in call.keywords]
        func = call.func
        runner = isinstance(func, ast.Name) and func.id in CODE_RUNNERS and self.var(func, func.id)[0] is None
        if runner and call.args:
            self.code_strings.add(id(call.args[0]))
        if isinstance(func, ast.Attribute) and func.attr == "run_cell_magic" and len(call.args) == 3 \
                and fold(call.args[0]) == "writefile":  # %%writefile helper.py, then import helper
            runner = True
            self.code_strings.add(id(call.args[2]))
        setter = isinstance(func, ast.Name) and func.id == "setattr" and call.args and _dynamic(call.args[0])
        if runner or setter or isinstance(func, ast.Attribute) and _dynamic(func.value):
            self.dynamic.extend(values)  # exec(...), globals().update(...), setattr(builtins, ...)
        if isinstance(func, ast.Name) and self.var(func, func.id)[0] is not None:
            self.calls.setdefault(self.var(func, func.id), []).append(call)  # the student's own function
            return
        if (isinstance(func, ast.Name) and func.id == "setattr" or isinstance(func, ast.Attribute)
                and func.attr == "__setattr__") and len(call.args) >= 2:
            name = fold(call.args[-2])
            if name is not None:
                self.attribute_stores.setdefault(name, []).append(call.args[-1])
        if isinstance(func, ast.Attribute):  # obj.method(values): obj may keep them (append, update, ...)
            for root in roots(func.value):
                for value in values:
                    self._flow(self.var(root, root.id), value, "kept")
        # a name passed to code that is not the student's (setattr, update_wrapper, ...) may take the others
        for arg in values:
            if isinstance(arg, ast.Name):
                for other in values:
                    if other is not arg:
                        self._flow(self.var(arg, arg.id), other)

    # -- strings used as names ---------------------------------------------------------------

    def _used_as_names(self) -> set[int]:
        """The nodes whose value the code uses as a name (getattr(torch, "soft" + "max"),
        vars(nn)["LayerNorm"], import_module("torch._refs"), a private PyTorch function given an
        operator's name), and every node whose value flows into one (a global, a parameter, an
        attribute, a list it is appended to, a function's return). Only strings among them can name
        a forbidden function: any other string is data (issue 58)."""
        todo = [node for tree in self.trees for node in ast.walk(tree) for node in self._name_arguments(node)]
        named: set[int] = set()
        returns = {id(f): [n.value for n in ast.walk(f) if isinstance(n, ast.Return) and n.value is not None]
                   for tree in self.trees for f in ast.walk(tree)
                   if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        seen_vars: set = set()
        while todo:
            root = todo.pop()
            for node in ast.walk(root):
                if id(node) in named:
                    continue
                named.add(id(node))
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                    var = self.var(node, node.id)
                    if var in seen_vars or var[0] is None:
                        continue
                    seen_vars.add(var)
                    for value, how in self.flows.get(var, []):
                        if how == "def":  # a function whose result is the name
                            todo += returns.get(id(value), []) + ([value.body] if isinstance(value, ast.Lambda) else [])
                        elif how != "import":
                            todo.append(value)
                    scope = var[0]
                    if node.id in scope.params and scope.node is not None:  # what callers pass
                        owner = self.owner_of.get(id(scope.node))
                        for call in self.calls.get(owner, []) if owner is not None else []:
                            todo += list(call.args) + [k.value for k in call.keywords]
                elif isinstance(node, ast.Attribute):
                    todo += self.attribute_stores.get(node.attr, [])
                elif isinstance(node, ast.Lambda):
                    todo.append(node.body)
        return named

    def _name_arguments(self, node: ast.AST) -> list[ast.AST]:
        """The parts of ``node`` that it uses as a name: a lookup's key (NAME_LOOKUPS, a subscript
        of anything but the student's own container), the arguments of a private PyTorch function
        (torch._C._jit_get_operation("aten::_softmax")) or of a call handed getattr (reduce)."""
        if isinstance(node, ast.Subscript):
            return [] if self._own_container(node.value) else [node.slice]
        if not isinstance(node, ast.Call):
            return []
        func, arguments = node.func, list(node.args) + [k.value for k in node.keywords]
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name in NAME_LOOKUPS:
            receiver = func.value if isinstance(func, ast.Attribute) else None
            own = receiver is None or self._own_container(receiver)
            if name in ("get", "pop", "setdefault", "__getitem__") and own:
                return []  # a lookup in the student's own dict or list
            return arguments
        private = any(isinstance(n, ast.Attribute) and n.attr.startswith("_") for n in ast.walk(func))
        handed = any(isinstance(a, ast.Name) and a.id in NAME_LOOKUPS for a in arguments)
        return arguments if private or handed else []

    def _own_container(self, node: ast.AST) -> bool:
        """Whether ``node`` is a container the student made (a dict or list display, dict(...)),
        never one of Python's or PyTorch's namespaces (vars(x), x.__dict__, globals())."""
        if isinstance(node, (ast.Dict, ast.DictComp, ast.List, ast.ListComp, ast.Tuple, ast.Set)):
            return True
        if isinstance(node, ast.Call):
            return isinstance(node.func, ast.Name) and node.func.id in CONTAINER_MAKERS
        if not isinstance(node, ast.Name):
            return False
        var = self.var(node, node.id)
        values = [value for value, how in self.flows.get(var, []) if how == "value"]
        made = [v for v in values if isinstance(v, (ast.Dict, ast.DictComp, ast.List, ast.ListComp, ast.Tuple, ast.Set))
                or isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in CONTAINER_MAKERS]
        return var[0] is not None and bool(made) and not any(_dynamic(v) or _dynamic_read(v) or (
            isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in ("vars", "getattr", "dir"))
            for v in values)

    def persists(self, function: ast.AST) -> bool:
        """Whether a function may keep what it is called with beyond the call: it writes a
        global or an enclosing variable, a class, or a mutable default. If it cannot, what
        other code passes to it (a scratch cell's arguments) never reaches a graded call."""
        if id(function) not in self._persists_memo:
            self._persists_memo[id(function)] = self._persists(function)
        return self._persists_memo[id(function)]

    def _persists(self, function: ast.AST) -> bool:
        own = self.scope_of.get(id(function.body[0] if isinstance(function.body, list) else function.body))
        defaults = set()
        if not isinstance(function, ast.ClassDef):
            args = function.args
            positional = args.posonlyargs + args.args
            defaults = {a.arg for a in positional[len(positional) - len(args.defaults):]}
            defaults |= {a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None}
        for node in ast.walk(function):
            if isinstance(node, (ast.Global, ast.Nonlocal)):
                return True
            targets = []
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                targets = [t for t in _flatten(node.targets if isinstance(node, (ast.Assign, ast.Delete))
                                               else [node.target]) if isinstance(t, (ast.Attribute, ast.Subscript))]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (node.args or node.keywords):
                targets = [node.func.value]
            for target in targets:
                if any(isinstance(n, ast.Attribute) and n.attr in ("__class__", "__dict__", "__defaults__",
                                                                  "__kwdefaults__", "__globals__")
                       for n in ast.walk(target)):
                    return True
                for root in roots(target):
                    scope, name = var = self.var(root, root.id)
                    if scope is not None and (scope is not own or name in defaults) and not (
                            isinstance(node, ast.Call) and self.imported(var)):
                        return True
                    if scope is None and isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                        return True  # torch.x = ..., builtins.x = ...
        return False

    # -- reachability ----------------------------------------------------------------------

    def uses(self, obj: Any, forbidden: Sequence[str]) -> list[Finding]:
        """The names among ``forbidden`` that the graded object can reach (each a Finding with
        the line that reaches it), and TOUCHES_CHECKS when the code tampers with the checks."""
        if not isinstance(obj, StudentObject):
            return []
        key = (obj.name, tuple(forbidden))
        if key not in self._uses_memo:
            self._uses_memo[key] = self._uses(obj, forbidden)
        return list(self._uses_memo[key])

    def _uses(self, obj: StudentObject, forbidden: Sequence[str]) -> list[Finding]:
        hits: dict[str, Finding] = {}
        for everywhere in (self.tampering, self.registering):
            if everywhere is not None:
                hits[str(everywhere)] = everywhere
        wanted: dict[str, str] = {}  # the identifier a student would write -> the name shown
        for name in forbidden:
            for word in ALWAYS_FORBIDDEN.get(name, [name.rsplit(".", 1)[-1]]):
                wanted.setdefault(word, name)
        walk = _Walk(self, wanted, hits)
        walk.run((self.module if obj.name in self.module.bound else None, obj.name))
        self._reached[obj.name] = walk.reached  # the same code, read again for the allowlist
        return list(hits.values())

    def outside_allowlist(self, obj: Any) -> list[Finding]:
        """What the code the graded object reaches (as uses() follows it: code that runs when it is
        graded, and values that flow into it) uses outside the allowlist, each with its first line,
        and what any cell uses that no cell may."""
        if not isinstance(obj, StudentObject):
            return []
        if obj.name not in self._outside_memo:
            if obj.name not in self._reached:
                self._uses(obj, [])
            found: dict[str, Finding] = {}
            if self.outside_anywhere is not None:
                found[str(self.outside_anywhere)] = self.outside_anywhere
            for root in self._reached[obj.name]:
                if id(root) not in self._within_memo:  # a helper that several graded names reach
                    self._within_memo[id(root)] = self.allowlist.within(root)
                for outside in self._within_memo[id(root)]:
                    name = OUTSIDE + outside.what
                    found.setdefault(name, Finding(name, self.line(outside.node)))
            self._outside_memo[obj.name] = list(found.values())
        return list(self._outside_memo[obj.name])

    def _first_line(self, name: str, counts: Callable[[ast.AST], bool]) -> Finding | None:
        """``name`` with the first line of the student's code where ``counts(node)``, or None."""
        for tree in self.trees:
            for node in ast.walk(tree):
                if counts(node):
                    return Finding(name, self.line(node))
        return None

    # -- registering operators ---------------------------------------------------------------

    def _registers(self, node: ast.AST) -> bool:
        """Whether ``node`` names a way to register operator kernels (REGISTRATION_NAMES): an
        attribute, an import, or a string built from constants."""
        if isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [part for alias in node.names for part in alias.name.split(".")]
            names += (node.module or "").split(".") if isinstance(node, ast.ImportFrom) else []
        elif isinstance(node, (ast.Constant, ast.BinOp, ast.JoinedStr, ast.Call)) and id(node) in self.named:
            names = re.split(r"[.:]", fold(node) or "")  # a string used as a name (any other is data)
        else:
            return False
        return not REGISTRATION_NAMES.isdisjoint(names)

    # -- tampering with the checks -----------------------------------------------------------

    def _tampers(self, node: ast.AST) -> bool:
        """Whether ``node`` reaches into the checks' machinery. Importing the public checks,
        reading their documentation and calling them is fine."""
        if isinstance(node, ast.Import):
            return any(_private_path(alias.name) for alias in node.names)
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.split(".")[0] != COURSE_CHECKS or node.level:
                return False
            return any(_private_path(f"{module}.{a.name}") and not _public_name(a.name) for a in node.names)
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            return any(self.is_checks(t) for t in _flatten(targets) if isinstance(t, (ast.Attribute, ast.Subscript)))
        if isinstance(node, ast.Attribute) and self.is_checks(node.value):
            return not (_public_name(node.attr) or node.attr in READ_ONLY_ATTRIBUTES or node.attr in PUBLIC_MODULES)
        if isinstance(node, ast.Call):
            func = node.func
            reader = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if reader in READERS or self.is_checks(func):
                return False  # reading the checks, or calling a public check as the test cells do
            return any(self.is_checks(a) for a in list(node.args) + [k.value for k in node.keywords])
        if isinstance(node, (ast.Constant, ast.BinOp, ast.JoinedStr)) and id(node) in self.named:
            text = fold(node)  # a string used as a name (import_module, sys.modules[...]); any other is data
            return text is not None and IDENTIFIER_PATH.match(text) is not None and _private_path(text)
        return False

    def is_checks(self, node: ast.AST, depth: int = 0) -> bool:
        """Whether ``node`` evaluates to the checks package, one of its modules or objects."""
        if depth > 30:
            return False
        if isinstance(node, ast.Name):
            var = self.var(node, node.id)
            if var[0] is None:  # not the student's: the package, or a check the setup cell imported
                return node.id == COURSE_CHECKS or _public_name(node.id)
            if var not in self._checks_memo:
                self._checks_memo[var] = False  # a cycle of assignments is not the checks
                module = self.imported(var)  # inspect.getsource(check_x) does not make inspect the checks
                self._checks_memo[var] = any(
                    _names_checks(self.import_path(value)) if how == "import" else
                    (how == "value" or how == "kept" and not module) and self.is_checks(value, depth + 1)
                    for value, how in self.flows.get(var, []))
            return self._checks_memo[var]
        if isinstance(node, ast.Subscript):
            return _names_checks(fold(node.slice) or "") or self.is_checks(node.value, depth + 1)
        if isinstance(node, ast.Attribute):
            return self.is_checks(node.value, depth + 1)
        if isinstance(node, ast.Call):  # import_module("attention_checks.x"), getattr(checks, ...)
            return any(_names_checks(fold(a) or "") for a in node.args) or (
                isinstance(node.func, ast.Name) and node.func.id == "getattr" and bool(node.args)
                and self.is_checks(node.args[0], depth + 1))
        return False

    def import_path(self, alias: ast.alias) -> str:
        """What an import alias binds: ``import a.b as n`` -> a.b, ``from m import x`` -> m.x."""
        statement = self.import_of[id(alias)]
        if isinstance(statement, ast.Import):
            return alias.name if alias.asname else alias.name.split(".")[0]
        return f"{statement.module or ''}.{alias.name}"


def _self_stays(method: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether a method uses its first parameter (self) only to reach attributes (``self.w_q(x)``,
    ``self.out = ...``): it never hands the object itself anywhere (a global list, a return, a
    closure's call), so that no other code can reach an instance but through a variable holding it."""
    if not method.args.args:
        return True
    name = method.args.args[0].arg
    parents = {id(child): node for node in ast.walk(method) for child in ast.iter_child_nodes(node)}
    return all(isinstance(parents.get(id(node)), ast.Attribute) and parents[id(node)].value is node
               for node in ast.walk(method) if isinstance(node, ast.Name) and node.id == name)


class _Walk:
    """One search from a graded name: variables reached, code scanned, forbidden names hit."""

    def __init__(self, scanner: SourceScanner, wanted: dict[str, str], hits: dict[str, Finding]):
        self.s, self.wanted, self.hits = scanner, wanted, hits
        self.todo: list[tuple[ast.AST, bool]] = []  # (node, strict): strict for code that runs when graded
        self.seen_vars: set = set()
        self.seen_nodes: set[tuple[int, bool]] = set()
        self.seen_attributes: set[str] = set()
        self.reached: list[ast.AST] = []  # the code scanned: what runs when graded, and what flows into it

    def hit(self, word: str, node: ast.AST):
        name = self.wanted[word]
        self.hits.setdefault(name, Finding(name, self.s.line(node)))

    def run(self, start: Var):
        self.reach(start)
        self.todo += [(value, False) for value in self.s.dynamic]  # globals()[k] = f, exec(...): could bind anything
        while self.todo:
            node, strict = self.todo.pop()
            if (id(node), strict) not in self.seen_nodes:
                self.seen_nodes.add((id(node), strict))
                self.reached.append(node)
                self.scan(node, strict)

    def reach(self, var: Var):
        if var in self.seen_vars:
            return
        self.seen_vars.add(var)
        scope, name = var
        if scope is None or scope.kind == "module":  # a write into builtins or a module may bind it too
            self.todo += [(value, False) for value in self.s.attribute_stores.get(name, [])]
        if scope is None:
            return
        if scope.kind == "module" and name in self.wanted:
            for star in scope.star_imports:  # from torch import *: softmax may be torch's
                self.hit(name, star)
        module = self.s.imported(var)
        for value, how in self.s.flows.get(var, []):
            if how == "kept" and module:
                continue  # nn.TransformerEncoder(layer): a module's function does not keep layer
            if how == "import":
                path = self.s.import_path(value)
                for word in _words(path.split(".", 1)[1] if "." in path else ""):
                    if word in self.wanted:
                        self.hit(word, value)
            else:
                self.todo.append((value, how == "def"))
        if name in scope.params and scope.node is not None:  # a parameter: what callers pass, if it is kept
            owner = self.s.owner_of.get(id(scope.node))
            if owner is not None and self.s.persists(scope.node):
                for call in self.s.calls.get(owner, []):
                    self.todo += [(value, False) for value in list(call.args) + [k.value for k in call.keywords]]

    def scan(self, root: ast.AST, strict: bool):
        """Everything ``root`` mentions. Not strict: code that ran before the graded calls,
        where a forbidden *function* that is called there only produced a value."""
        stack, called = [root], set()
        while stack:
            node = stack.pop()
            if node is not root and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                self.todo.append((node, True))  # a function made here runs whenever it is called
                continue
            stack.extend(ast.iter_child_nodes(node))
            if isinstance(node, ast.Call) and not strict:
                called.add(id(node.func))
            if strict and _dynamic_read(node):  # globals()[name], sys.modules[__name__].x: any global
                for var in [(self.s.module, name) for name in sorted(self.s.module.bound)]:
                    self.reach(var)
            data = id(node) in called
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                var = self.s.var(node, node.id)
                if var[0] is None and node.id in self.wanted and not (data and _function_like(node.id)):
                    self.hit(node.id, node)
                self.reach(var)
            elif isinstance(node, ast.Attribute):
                own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
                if node.attr in self.wanted and not own and not (data and _function_like(node.attr)):
                    self.hit(node.attr, node)
                if node.attr not in self.seen_attributes:  # values stored into that attribute anywhere
                    self.seen_attributes.add(node.attr)
                    self.todo += [(value, False) for value in self.s.attribute_stores.get(node.attr, [])]
            elif isinstance(node, ast.alias):
                statement = self.s.import_of.get(id(node))
                for word in _words(node.name if isinstance(statement, ast.Import) else node.name.split(".")[-1]):
                    if word in self.wanted:
                        self.hit(word, node)
            elif isinstance(node, (ast.Constant, ast.BinOp, ast.JoinedStr, ast.Call, ast.Subscript)) \
                    and id(node) not in self.s.docstrings \
                    and (id(node) in self.s.named or id(node) in self.s.code_strings):
                self.strings(node)  # a string used as a name, or code run by exec; any other is data

    def strings(self, node: ast.AST):
        """A string that names a forbidden function (getattr(torch, "soft" + "max")), or code
        given to exec or eval that mentions one."""
        text = fold(node)
        if text is None:
            return
        if IDENTIFIER_PATH.match(text.strip()):
            words = _words(text)
        elif id(node) in self.s.code_strings:
            try:
                tree = ast.parse(text)
            except (SyntaxError, ValueError):
                return
            words = [w for inner in ast.walk(tree) for w in (
                [inner.id] if isinstance(inner, ast.Name) else [inner.attr] if isinstance(inner, ast.Attribute)
                else _words(inner.name) if isinstance(inner, ast.alias) else _words(inner.value)
                if isinstance(inner, ast.Constant) and isinstance(inner.value, str) else [])]
        else:
            return
        for word in words:
            if word in self.wanted:
                self.hit(word, node)


def _parsed(sources: Sequence[str]) -> list[ast.Module]:
    """The course's cells as Python (for the imports they give the notebook); one that does not
    parse gives none."""
    return [tree for source in sources if (tree := _parsed_cell(source)) is not None]


@functools.lru_cache(maxsize=256)
def _parsed_cell(source: str) -> ast.Module | None:
    """One of the course's cells, parsed once per process: every notebook of an assignment holds
    the same (nothing reads these trees but for their imports, and nothing changes them)."""
    try:
        return ast.parse(TransformerManager().transform_cell(source))
    except (SyntaxError, ValueError):
        return None


# Cell magics that run the rest of the cell as Python, in the notebook's namespace.
PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun", "debug", "python", "python3"}


def _python_cell_magic(code: str) -> str | None:
    """The Python a cell magic of PYTHON_CELL_MAGICS runs (IPython made the cell one
    ``run_cell_magic(name, line, body)`` call), or None for any other cell."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Expr):
        return None
    call = tree.body[0].value
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "run_cell_magic" \
            and len(call.args) == 3 and fold(call.args[0]) in PYTHON_CELL_MAGICS and fold(call.args[2]) is not None:
        return fold(call.args[2])
    return None


def roots(node: ast.AST) -> list[ast.Name]:
    """The names whose objects ``a.b[c].d`` (or ``vars(a)[k]``, ``type(a).x``) reaches into."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    if isinstance(node, ast.Name):
        return [node]
    if isinstance(node, ast.Call):
        return [a for a in node.args if isinstance(a, ast.Name)] + roots(node.func)
    return []


def _namespace(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return node.id in DYNAMIC_NAMESPACES
    if isinstance(node, ast.Attribute):  # x.__dict__, sys.modules (not model.modules())
        owner = node.value.id if isinstance(node.value, ast.Name) else ""
        return f"{owner}.{node.attr}" in DYNAMIC_NAMESPACES or node.attr == "__dict__"
    return False


def _dynamic(node: ast.AST) -> bool:
    """Goes through a namespace (globals(), builtins, sys.modules, x.__dict__, ...)."""
    return any(_namespace(n) for n in ast.walk(node))


def _dynamic_read(node: ast.AST) -> bool:
    """globals(), locals(), vars() without arguments, or x.__dict__ / sys.modules, read in code."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args:
        return node.func.id in ("globals", "locals", "vars")
    return isinstance(node, ast.Attribute) and _namespace(node) and not (
        isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))


def _function_like(word: str) -> bool:
    """A function (calling it gives a value), not a class (calling it gives the module itself)."""
    return not word.lstrip("_")[:1].isupper()


def _flatten(targets: Iterable[ast.AST]) -> Iterable[ast.AST]:
    for target in targets:
        if isinstance(target, (ast.Tuple, ast.List)):
            yield from _flatten(target.elts)
        elif isinstance(target, ast.Starred):
            yield from _flatten([target.value])
        else:
            yield target


def _names_checks(path: str) -> bool:
    return path.split(".")[0] == COURSE_CHECKS


def _public_name(name: str) -> bool:
    return name.startswith("check_") or name in PUBLIC_NAMES


def _private_path(path: str) -> bool:
    """A dotted path into the checks beyond their public modules and names (attention_checks.record)."""
    parts = path.split(".")
    if parts[0] != COURSE_CHECKS:
        return False
    rest = parts[1:]
    if rest and rest[0] in PUBLIC_MODULES:
        rest = rest[1:]
    return bool(rest) and not (len(rest) == 1 and (_public_name(rest[0]) or rest[0] in READ_ONLY_ATTRIBUTES))
