"""nbgrader's feedback pages, rendered for a whole class without redoing per-page work
that gives the same result for every page.

nbgrader builds a new HTML exporter for every student, and each one parses and
compiles the same Jinja templates again; then nbconvert re-parses the whole page with
BeautifulSoup, to give images without a description an alt text and JupyterLab cells a
tabindex. Together that is most of the time a feedback page takes. Here the compiled
templates are kept for the process (Jinja's bytecode cache, checked against the
template source), and the alt text is added to the page's <img> tags directly: the
feedback template is the classic one, which has no JupyterLab cells.

Most cells are the same on every page (instructions, setup, tests): their markdown and
highlighted code are rendered once per process. The page's notebook was validated when
it was read, so it is not validated again after each step (see exporters.py).
"""
from __future__ import annotations

import json
import re
from collections import OrderedDict

import jinja2
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter

from .exporters import ValidatedAfterKernel

NO_ALT = re.compile(r"<img(?![^>]*\salt=)", re.IGNORECASE)
ALT_TEXT = "No description has been provided for this image"  # nbconvert's words


class MemoryBytecodeCache(jinja2.BytecodeCache):
    def __init__(self):
        self.compiled: dict[str, bytes] = {}

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        if bucket.key in self.compiled:
            bucket.bytecode_from_string(self.compiled[bucket.key])  # ignored if the source changed

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        self.compiled[bucket.key] = bucket.bytecode_to_string()


class RenderedCells(OrderedDict):
    """HTML by everything it depends on; the oldest entries go first (students' own cells
    are seldom seen twice, the course's cells on every page)."""

    size = 4096

    def get_or_render(self, key: tuple, render) -> str:
        if key in self:
            self.move_to_end(key)
        else:
            self[key] = render()
            if len(self) > self.size:
                self.popitem(last=False)
        return self[key]


class CachedHighlight2HTML(Highlight2HTML):
    """nbconvert's code highlighting, remembered: the same code gives the same HTML."""

    rendered = RenderedCells()

    def __call__(self, source, language=None, metadata=None):
        key = (source, language or self.pygments_lexer, (metadata or {}).get("magics_language"),
               json.dumps(self.extra_formatter_options, sort_keys=True, default=repr))
        return self.rendered.get_or_render(key, lambda: super(CachedHighlight2HTML, self).__call__(
            source, language, metadata))


class FeedbackExporter(ValidatedAfterKernel, HTMLExporter):
    """nbgrader's feedback exporter (HTML with its feedback template), sharing compiled
    templates, rendering each distinct cell once and adding alt text without re-parsing
    the page."""

    compiled_templates = MemoryBytecodeCache()
    rendered_markdown = RenderedCells()

    def _create_environment(self) -> jinja2.Environment:
        environment = super()._create_environment()
        environment.bytecode_cache = self.compiled_templates
        return environment

    @jinja2.pass_context
    def markdown2html(self, context, source):
        render = lambda: HTMLExporter.markdown2html(self, context, source)  # noqa: E731
        if context.get("cell", {}).get("attachments") or self.embed_images:
            return render()  # depends on the cell and the notebook's folder, not only its text
        key = (source, self.anchor_link_text, self.exclude_anchor_links,
               json.dumps(self.lexer_options, sort_keys=True, default=repr))
        return self.rendered_markdown.get_or_render(key, render)

    def from_notebook_node(self, nb, resources=None, **kw):
        # HTMLExporter.from_notebook_node up to the template, then the alt text.
        language = nb.metadata.get("language_info", {})
        lexer = language.get("pygments_lexer", language.get("name", None))
        self.register_filter("highlight_code",
                             self.filters.get("highlight_code", CachedHighlight2HTML(pygments_lexer=lexer, parent=self)))
        resources = self._init_resources(resources)
        self.register_filter("filter_data_type", WidgetsDataTypeFilter(notebook_metadata=self._nb_metadata,
                                                                       parent=self, resources=resources))
        page, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        return NO_ALT.sub(f'<img alt="{ALT_TEXT}"', page), resources
