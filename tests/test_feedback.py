"""The feedback exporter: nbconvert's page, faster, with the same text and alt texts."""
from __future__ import annotations

import copy
import html
import re

import nbformat
from nbconvert.exporters import HTMLExporter

from autograder.feedback import ALT_TEXT, CachedHighlight2HTML, FeedbackExporter

PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def _notebook() -> nbformat.NotebookNode:
    plot = nbformat.v4.new_output("display_data", data={"image/png": PIXEL, "text/plain": "<Figure>"})
    described = nbformat.v4.new_output("display_data", data={"text/html": '<img src="x.png" alt="mine">'})
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Scores\n\nThe *softmax* of $x_i$ & <b>bold</b>"),
        nbformat.v4.new_code_cell("weights = [i / 3 for i in range(3)]  # comment", outputs=[plot, described]),
    ])
    nb.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3"}
    return nb


def _text(page: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page))).strip()


def test_pages_read_as_nbconvert_renders_them():
    nbconvert_page, _ = HTMLExporter(template_name="classic").from_notebook_node(_notebook())
    page, _ = FeedbackExporter(template_name="classic").from_notebook_node(_notebook())
    assert _text(page) == _text(nbconvert_page)
    assert "The softmax of" in _text(page)


def test_images_get_an_alt_text_unless_they_have_one():
    page, _ = FeedbackExporter(template_name="classic").from_notebook_node(_notebook())
    images = re.findall(r"<img[^>]*>", page)
    assert len(images) == 2 and all(" alt=" in image for image in images)
    assert sum(ALT_TEXT in image for image in images) == 1
    assert any('alt="mine"' in image for image in images)


def test_templates_are_compiled_once_per_process():
    FeedbackExporter(template_name="classic").from_notebook_node(_notebook())
    compiled = dict(FeedbackExporter.compiled_templates.compiled)
    FeedbackExporter(template_name="classic").from_notebook_node(_notebook())
    assert compiled and FeedbackExporter.compiled_templates.compiled == compiled


def test_cells_are_rendered_once_per_process_and_pages_stay_the_same():
    """The course's own cells are on every page: rendered once, the same page either way."""
    FeedbackExporter.rendered_markdown.clear()
    CachedHighlight2HTML.rendered.clear()
    nb = _notebook()
    first, _ = FeedbackExporter(template_name="classic").from_notebook_node(copy.deepcopy(nb))
    rendered = len(FeedbackExporter.rendered_markdown), len(CachedHighlight2HTML.rendered)
    assert rendered == (1, 1)
    again, _ = FeedbackExporter(template_name="classic").from_notebook_node(copy.deepcopy(nb))
    assert again == first
    assert (len(FeedbackExporter.rendered_markdown), len(CachedHighlight2HTML.rendered)) == rendered
    answer = _notebook()
    answer.cells[1].source = "weights = [0.5, 0.5]"  # another student's code
    page, _ = FeedbackExporter(template_name="classic").from_notebook_node(answer)
    assert "weights = [ 0.5 , 0.5 ]" in _text(page) and "i / 3" not in _text(page)


def test_markdown_with_attachments_is_rendered_for_its_cell():
    nb = _notebook()
    nb.cells[0] = nbformat.v4.new_markdown_cell("![plot](attachment:plot.png)",
                                                attachments={"plot.png": {"image/png": PIXEL}})
    page, _ = FeedbackExporter(template_name="classic").from_notebook_node(nb)
    assert "AAAAAAA=" not in page
    other = _notebook()
    other.cells[0] = nbformat.v4.new_markdown_cell("![plot](attachment:plot.png)",
                                                   attachments={"plot.png": {"image/png": PIXEL[:-8] + "AAAAAAA="}})
    page, _ = FeedbackExporter(template_name="classic").from_notebook_node(other)
    assert "AAAAAAA=" in page  # its own attachment, not the first page's


def test_a_markdown_cell_whose_attachment_is_gone_still_gets_a_page():
    """The grader keeps a student's markdown but not its attachments: the page shows the text."""
    nb = _notebook()
    nb.cells[0] = nbformat.v4.new_markdown_cell("my plot: ![plot](attachment:plot.png)")
    page, _ = FeedbackExporter(template_name="classic").from_notebook_node(nb)
    assert "my plot:" in _text(page) and "missing attachment: plot.png" in _text(page)
