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
how many points await that (nbgrader's template would show them as 0 out of their points).
An answer left as released ("YOUR ANSWER HERE") has nbgrader's 0, and is shown so.
"""
from __future__ import annotations

import copy
import html
import json
import re
from collections import OrderedDict

import bleach
import jinja2
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.markdown_mistune import InvalidNotebook
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from nbconvert.preprocessors.sanitize import SanitizeHTML
from nbgrader.preprocessors import NbGraderPreprocessor
from nbgrader.utils import determine_grade
from traitlets import Unicode

from .exporters import ValidatedAfterKernel
from .cells import grade_id_of, is_course_cell, is_written_answer, nbgrader_metadata

NO_ALT = re.compile(r"<img(?![^>]*\salt=)", re.IGNORECASE)
# nbgrader's feedback template: the notebook's score in the page's heading ...
PAGE_SCORE = re.compile(r"\(Score: (?P<score>[0-9.]+) / (?P<max>[0-9.]+)\)(?=</h4>)")
ALT_TEXT = "No description has been provided for this image"  # nbconvert's words


# What a student's HTML may hold: text, structure, tables, links and embedded raster images;
# no scripts, event handlers, styles, forms, frames or SVG. (bleach: a parser, not regexes.)
SAFE_TAGS = {"a", "abbr", "b", "blockquote", "br", "caption", "code", "dd", "del", "div", "dl", "dt", "em",
             "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "samp",
             "span", "strong", "sub", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul"}
LINKS = re.compile(r"(https?:|mailto:|#)", re.IGNORECASE)  # not javascript:, data:, ...
EMBEDDED_IMAGE = re.compile(r"data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*\Z", re.IGNORECASE)


def _safe_attribute(tag: str, name: str, value: str) -> bool:
    if name in ("class", "title") or (tag in ("td", "th") and name in ("colspan", "rowspan")):
        return True
    if tag == "a" and name == "href":
        return bool(LINKS.match(value))
    if tag == "img":  # only images in the page itself: a student's page loads nothing from anywhere
        return name in ("alt", "width", "height") or (name == "src" and bool(EMBEDDED_IMAGE.match(value)))
    return False


CLEANER = bleach.Cleaner(tags=SAFE_TAGS, attributes=_safe_attribute, protocols={"http", "https", "mailto", "data"},
                         strip=False, strip_comments=True)  # disallowed tags show as text


def _points(points: float) -> str:
    return f"{points:g} point" + ("" if points == 1 else "s")


def mark_hand_graded(page: str, nb) -> str:
    """The written answers of a feedback page that await a person as "graded by hand later", not
    as 0 points: in the table of contents, in each answer's heading, and in the notebook's score.
    Which ones: nbgrader's own rule (``determine_grade``: no automatic score)."""
    written = [(grade_id_of(c), float(nbgrader_metadata(c).get("points", 0)))
               for c in nb.cells if is_written_answer(c) and determine_grade(c)[0] is None]
    for grade_id, points in written:
        note = f"graded by hand later ({_points(points)})"
        gid = re.escape(html.escape(grade_id))
        page = re.sub(rf'(<a href="#{gid}">[^<]*</a>) \(Score: [0-9.]+ / [0-9.]+\)', rf"\1 ({note})", page, count=1)
        page = re.sub(rf'(<a name="{gid}"></a><div class="panel-heading">(?:(?!</div>).)*?)Score: [0-9.]+ / [0-9.]+',
                      lambda m: m[1] + note[0].upper() + note[1:], page, count=1, flags=re.S)
    manual = sum(points for _, points in written)
    if manual:
        page = PAGE_SCORE.sub(lambda m: f"(Score: {float(m['score']):g} / {float(m['max']):g}; "
                                        f"{_points(manual)} of written answers: graded by hand later)", page, count=1)
    return page


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

    begin = Unicode("BEGIN HIDDEN TESTS").tag(config=True)
    end = Unicode("END HIDDEN TESTS").tag(config=True)
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
        return environment

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
        return mark_hand_graded(NO_ALT.sub(f'<img alt="{ALT_TEXT}"', page), nb), resources
