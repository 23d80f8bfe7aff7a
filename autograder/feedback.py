"""nbgrader's feedback pages, rendered for a whole class without redoing per-page work
that gives the same result for every page.

nbgrader builds a new HTML exporter for every student, and each one parses and
compiles the same Jinja templates again; then nbconvert re-parses the whole page with
BeautifulSoup, to give images without a description an alt text and JupyterLab cells a
tabindex. Together that is most of the time a feedback page takes. Here the compiled
templates are kept for the process (Jinja's bytecode cache, checked against the
template source), and the alt text is added to the page's <img> tags directly: the
feedback template is the classic one, which has no JupyterLab cells.
"""
from __future__ import annotations

import re

import jinja2
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter

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


class FeedbackExporter(HTMLExporter):
    """nbgrader's feedback exporter (HTML with its feedback template), sharing compiled
    templates and adding alt text without re-parsing the page."""

    compiled_templates = MemoryBytecodeCache()

    def _create_environment(self) -> jinja2.Environment:
        environment = super()._create_environment()
        environment.bytecode_cache = self.compiled_templates
        return environment

    def from_notebook_node(self, nb, resources=None, **kw):
        # HTMLExporter.from_notebook_node up to the template, then the alt text.
        language = nb.metadata.get("language_info", {})
        lexer = language.get("pygments_lexer", language.get("name", None))
        self.register_filter("highlight_code",
                             self.filters.get("highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self)))
        resources = self._init_resources(resources)
        self.register_filter("filter_data_type", WidgetsDataTypeFilter(notebook_metadata=self._nb_metadata,
                                                                       parent=self, resources=resources))
        page, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        return NO_ALT.sub(f'<img alt="{ALT_TEXT}"', page), resources
