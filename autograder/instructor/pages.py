"""The instructor's offline pages (the similarity report, the class report): Jinja2 templates in
``instructor/templates/``, every value escaped unless a filter marks it safe, and an undefined
name an error rather than an empty string."""
from __future__ import annotations

from functools import cache
from pathlib import Path

import jinja2

TEMPLATES = Path(__file__).parent / "templates"


@cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def render(template: str, **values) -> str:
    return environment().get_template(template).render(**values)
