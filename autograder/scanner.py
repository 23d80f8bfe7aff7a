"""Reading the student's source for what the kernel could hide: forbidden calls that a
graded object can reach, and code that tampers with the course's checks."""
from __future__ import annotations

import ast
from typing import Any, Sequence

from IPython.core.inputtransformer2 import TransformerManager

import attention_checks

COURSE_CHECKS = "attention_checks"
TOUCHES_CHECKS = "the course's own checks (attention_checks) from its code"


class StudentObject:
    """Stands, in the grader's process, for a name the student's notebook defines."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"<the notebook's {self.name}>"


class SourceScanner:
    """Finds uses of forbidden names in the student's code that a graded object can reach,
    and any use of the course's checks beyond importing its ``check_*`` functions (code
    that patches the recorder could forge outcomes, so it forfeits every check)."""

    def __init__(self, sources: Sequence[str]):
        self.defs: dict[str, list[ast.AST]] = {}
        self.statements: list[ast.stmt] = []  # module-level statements other than definitions
        self.touches_checks = False
        transform = TransformerManager().transform_cell  # %magics and !shell lines -> Python
        for source in sources:
            try:
                tree = ast.parse(transform(source))
            except (SyntaxError, ValueError):
                continue  # a cell that does not parse defines nothing
            self.touches_checks |= any(_touches_checks(node) for node in ast.walk(tree))
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    self.defs.setdefault(node.name, []).append(node)
                else:
                    self.statements.append(node)

    def uses(self, obj: Any, forbidden: Sequence[str]) -> list[str]:
        if not isinstance(obj, StudentObject):
            return []
        reachable = self._reachable(obj.name)
        attrs = {name.rsplit(".", 1)[-1]: name for name in forbidden}
        hits = [TOUCHES_CHECKS] if self.touches_checks else []
        for node in (n for root in reachable for n in ast.walk(root)):
            for word in _words(node):
                if word in attrs and not (word in self.defs and isinstance(node, ast.Name)):
                    hits.append(attrs[word])
        return list(dict.fromkeys(hits))

    def _reachable(self, name: str) -> list[ast.AST]:
        """The definitions of ``name``, what they use, and the statements binding those names."""
        seen, todo, nodes = set(), [name], []
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            found = list(self.defs.get(current, []))
            found += [s for s in self.statements if current in _bound_names(s)]
            nodes += found
            todo += [n.id for node in found for n in ast.walk(node) if isinstance(n, ast.Name)]
        return nodes


def _touches_checks(node: ast.AST) -> bool:
    """Mentions the course's checks other than to import its public names (``check_*``, ``pick_device``)."""
    if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == COURSE_CHECKS:
        public = set(attention_checks.__all__)
        return not all((alias.name.startswith("check_") or alias.name in public) and not alias.asname
                       for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        return False
    return COURSE_CHECKS in " ".join(_words(node))


def _bound_names(statement: ast.stmt) -> set[str]:
    names = set()
    for node in ast.walk(statement):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return names


def _words(node: ast.AST) -> list[str]:
    """The identifiers and strings a node mentions, where a forbidden name could hide."""
    if isinstance(node, ast.Attribute):
        # self.layer_norm is the student's own attribute, not F.layer_norm
        own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
        return [] if own else [node.attr]
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.alias):
        return node.name.split(".") + [node.asname or ""]
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    return []
