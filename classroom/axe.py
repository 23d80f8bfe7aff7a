"""axe-core's accessibility rules run in a page open in headless Chromium (the book's pages in
tests/test_browser.py; the service's pages can use the same).

axe-core is installed by `python tools/web_assets.py --tests` (`make test` runs it) from the npm
registry, pinned like the site's MathJax, into a folder the site never serves. ``violations``
injects it into the page once and returns what it finds at the impacts asked for (by default
serious and critical: what keeps someone from using the page).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Protocol

from classroom import REPO

SERIOUS = ("serious", "critical")
# axe.run's result, reduced to what a report needs: each rule broken, and a few of the elements.
RUN = """axe.run(document, {resultTypes: ["violations"]}).then(result => result.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help, count: v.nodes.length,
    nodes: v.nodes.slice(0, 3).map(n => n.target.join(" ") + ": " + (n.failureSummary || "").split("\\n").slice(1, 2).join(""))
})))"""


class EvaluatingPage(Protocol):
    def evaluate(self, expression: str, timeout: float = 30) -> Any: ...


def script_path() -> Path:
    """axe.min.js, where tools/web_assets.py --tests installs it."""
    spec = importlib.util.spec_from_file_location("course_web_assets", REPO / "tools" / "web_assets.py")
    web_assets = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(web_assets)
    path = web_assets.tests_dir() / "axe-core" / "axe.min.js"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run `python tools/web_assets.py --tests` "
                                "(`make test` does; needs npm once)")
    return path


def violations(page: EvaluatingPage, impacts: tuple[str, ...] = SERIOUS) -> list[dict]:
    """The rules of axe-core that the page, as loaded, breaks at one of ``impacts``: each a dict
    with the rule's id, impact, help text, the number of elements and a few of them."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(script_path().read_text(encoding="utf-8") + "\n;true", timeout=60)
    return [v for v in page.evaluate(RUN, timeout=180) if v["impact"] in impacts]


def describe(found: list[dict]) -> str:
    """One line per rule broken, with a few of the elements."""
    return "\n".join(f"{v['impact']} {v['id']} ({v['count']} elements): {v['help']}; e.g. {v['nodes']}"
                     for v in found)
