"""The feedback exporter: nbconvert's page, faster, with the same text and alt texts."""
from __future__ import annotations

import html
import re

import nbformat
from nbconvert.exporters import HTMLExporter

from autograder.feedback import ALT_TEXT, FeedbackExporter

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
