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

The page is opened by the instructor, or served by an LMS: nothing the student
controls may run in it. Every output comes from the student's kernel (a student's
cell can make a course cell display anything), so every output is sanitised; so are
markdown cells that are not the course's own. The course's markdown cells (their
source restored from the source notebook) stay as they are.

Written answers (nbgrader's manually graded answers) are graded by hand after the page is
made: the page shows such an answer as "graded by hand later", and the score at the top says
how many points await that (nbgrader's template would show them as 0 out of their points): a
template of the course's, which extends nbgrader's (``TEMPLATE_NAME``).
An answer left as released ("YOUR ANSWER HERE") has nbgrader's 0, and is shown so.
"""
from __future__ import annotations

import copy
import html
import json
import re
from collections import OrderedDict
from pathlib import Path

import jinja2
import nh3
import nbgrader
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.markdown_mistune import InvalidNotebook
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from nbconvert.preprocessors.sanitize import SanitizeHTML
from nbgrader.preprocessors import GetGrades, NbGraderPreprocessor
from traitlets import Unicode, default

from autograder.cells import (BEGIN_HIDDEN_TESTS, END_HIDDEN_TESTS, grade_id_of, is_course_cell, is_test_cell,
                              is_written_answer)
from autograder.grading.exporters import ValidatedAfterKernel

NO_ALT = re.compile(r"<img(?![^>]*\salt=)", re.IGNORECASE)
# The page's template: nbgrader's feedback template, less the 0 points of answers a person has
# not graded yet (templates/course_feedback/index.html.j2, which extends it).
NBGRADER_TEMPLATES = str(Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "templates")
TEMPLATE_NAME = "course_feedback"
TEMPLATE_DIRS = [NBGRADER_TEMPLATES, str(Path(__file__).parent / "templates")]
ALT_TEXT = "No description has been provided for this image"  # nbconvert's words


# What a student's HTML may hold: text, structure, tables, links and embedded raster images;
# no scripts, event handlers, styles, forms, frames or SVG. (nh3, the binding of Rust's ammonia:
# an HTML5 parser, not regexes.) Another tag is removed, its text kept; a script's or a style's
# text goes with it.
SAFE_TAGS = {"a", "abbr", "b", "blockquote", "br", "caption", "code", "dd", "del", "div", "dl", "dt", "em",
             "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "samp",
             "span", "strong", "sub", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul"}
LINKS = re.compile(r"(https?:|mailto:|#)", re.IGNORECASE)  # not javascript:, data:, ...
EMBEDDED_IMAGE = re.compile(r"data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*\Z", re.IGNORECASE)


SAFE_ATTRIBUTES = {"*": {"class", "title"}, "td": {"colspan", "rowspan"}, "th": {"colspan", "rowspan"},
                   "a": {"href"}, "img": {"alt", "width", "height", "src"}}


def _safe_value(tag: str, name: str, value: str) -> str | None:
    """An allowed attribute's value, or None to drop the attribute: a link goes to the web, an
    address or the page itself; an image is in the page (a student's page loads nothing)."""
    if tag == "a" and name == "href":
        return value if LINKS.match(value) else None
    if tag == "img" and name == "src":
        return value if EMBEDDED_IMAGE.match(value) else None
    return value


CLEANER = nh3.Cleaner(tags=SAFE_TAGS, attributes=SAFE_ATTRIBUTES, attribute_filter=_safe_value,
                      url_schemes={"http", "https", "mailto", "data"}, strip_comments=True)


def _points(points: float) -> str:
    return f"{points:g} point" + ("" if points == 1 else "s")


PENDING = "autograder_awaiting_a_person"  # in a written answer's metadata, on its way to the page


class GetGradesAndPending(GetGrades):
    """nbgrader's GetGrades (each grade cell's score from the gradebook, for the page), also
    noting the written answers no person has graded yet: nbgrader's score of those is 0, which
    the page would show as 0 out of their points (templates/course_feedback says "graded by
    hand later" instead)."""

    def _get_score(self, cell, resources) -> None:
        grade = self.gradebook.find_grade(grade_id_of(cell), self.notebook_id, self.assignment_id, self.student_id)
        cell.metadata.nbgrader["score"], cell.metadata.nbgrader["points"] = grade.score, grade.max_score
        cell.metadata[PENDING] = is_written_answer(cell) and grade.manual_score is None and grade.auto_score is None


def awaiting_a_person(cell) -> bool:
    """The template's test: a written answer that no person has graded yet."""
    return bool(cell.get("metadata", {}).get(PENDING))


# The setup cell: the course's code cell that imports the checks (release.py's install line is in it)
IMPORTS_THE_CHECKS = re.compile(r"^\s*(from|import) attention_checks\b", re.MULTILINE)


def setup_cell(cell) -> bool:
    """The template's test: the course's setup cell, which the page folds."""
    return cell.get("cell_type") == "code" and is_course_cell(cell) and not is_test_cell(cell) \
        and bool(IMPORTS_THE_CHECKS.search(cell.get("source", "")))


def _image_sizes(metadata: dict) -> dict:
    """An output's metadata, less all but numeric image sizes: the template writes a width
    unquoted (a string could add attributes), a file name as a source, ``isolated`` HTML as
    a frame."""
    return {mime: {k: v for k, v in sizes.items()
                   if k in ("width", "height") and type(v) in (int, float)}
            for mime, sizes in metadata.items() if isinstance(sizes, dict)}


class HideHiddenTests(NbGraderPreprocessor):
    """Replace each hidden-test region by a one-line note, for the student's feedback.

    nbgrader's default feedback shows the autograded notebook, whose test cells were
    restored from the source notebook: hidden tests included. The outputs (which test
    failed and why) stay; only the source of the hidden region goes.
    """

    begin = Unicode(BEGIN_HIDDEN_TESTS).tag(config=True)
    end = Unicode(END_HIDDEN_TESTS).tag(config=True)
    note = Unicode("# (hidden tests: their results are below, their code is not shown)").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and self.begin in cell.source:
            kept, hidden = [], False
            for line in cell.source.splitlines():
                if self.begin in line:
                    hidden = True
                    kept.append(line[: len(line) - len(line.lstrip())] + self.note)
                elif self.end in line:
                    hidden = False
                elif not hidden:
                    kept.append(line)
            cell.source = "\n".join(kept)
        return cell, resources


class SanitizeStudentContent(SanitizeHTML):
    """nbconvert's SanitizeHTML, for what reaches a feedback page from the student: every
    output keeps only plain text, PNG/JPEG images, LaTeX and JSON, with HTML and markdown
    cleaned (JavaScript, SVG, widgets and other kinds are dropped); raw cells that are not the
    course's are cleaned; the kernel's widget state goes (the page would run its widgets).
    Markdown cells are rendered first and cleaned after (FeedbackExporter.markdown2html), so
    that a link made in markdown is checked too."""

    def preprocess(self, nb, resources):
        nb.metadata.pop("widgets", None)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code":
            # An output left with nothing to show goes (nbconvert would warn that it cannot show it).
            cell.outputs = [o for o in self.sanitize_code_outputs(cell.outputs)
                            if o.output_type in ("stream", "error") or o.get("data")]
            for output in cell.outputs:
                if "metadata" in output:
                    output.metadata = _image_sizes(output.metadata)
        elif cell.cell_type == "raw" and not is_course_cell(cell):
            cell.source = self.sanitize_html_tags(cell.source)
        return cell, resources

    def sanitize_html_tags(self, html_str):
        return CLEANER.clean(html_str)


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
    sanitizer = SanitizeStudentContent()

    def _create_environment(self) -> jinja2.Environment:
        environment = super()._create_environment()
        environment.bytecode_cache = self.compiled_templates
        environment.tests["awaiting_a_person"] = awaiting_a_person
        environment.tests["setup_cell"] = setup_cell
        environment.filters["points"] = _points
        return environment

    @default("template_paths")
    def _template_paths(self, prune=True, root_dirs=None) -> list[str]:
        # nbgrader's templates by their own names too: the course's page extends 'feedback/index.html.j2'
        return [*super()._template_paths(prune, root_dirs), NBGRADER_TEMPLATES]

    @jinja2.pass_context
    def markdown2html(self, context, source):
        # Markdown in a code cell is an output: the student's, as is a markdown cell of theirs.
        cell = context.get("cell", {})
        trusted = cell.get("cell_type") == "markdown" and is_course_cell(cell)
        def render():
            try:
                page = HTMLExporter.markdown2html(self, context, source)
            except InvalidNotebook as err:  # e.g. an image of an attachment the cell lost: show the text
                page = f"<pre>{html.escape(source)}</pre><p>({html.escape(str(err))})</p>"
            return page if trusted else CLEANER.clean(page)
        if cell.get("attachments") or self.embed_images:
            return render()  # depends on the cell and the notebook's folder, not only its text
        key = (source, trusted, self.anchor_link_text, self.exclude_anchor_links,
               json.dumps(self.lexer_options, sort_keys=True, default=repr))
        return self.rendered_markdown.get_or_render(key, render)

    def from_notebook_node(self, nb, resources=None, **kw):
        nb, resources = self.sanitizer.preprocess(copy.deepcopy(nb), resources)
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
