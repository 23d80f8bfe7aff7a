"""The feedback exporter: nbconvert's page, faster, with the same text and alt texts."""
from __future__ import annotations

import copy
import html
import re

import nbformat
from nbconvert.exporters import HTMLExporter

from autograder.grading.feedback import ALT_TEXT, PENDING, TEMPLATE_DIRS, TEMPLATE_NAME, CachedHighlight2HTML, FeedbackExporter

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


def _graded_page(answer: str) -> str:
    """A feedback page of the course's template (nbgrader's, extended) for an autograded notebook: a
    test cell with its points and a written answer (solution and grade cell) with the checksum of
    its release."""
    from nbgrader.converters import GenerateFeedback
    from nbgrader.utils import compute_checksum

    test = nbformat.v4.new_code_cell("check(f)", metadata={"nbgrader": {
        "grade": True, "solution": False, "locked": True, "grade_id": "test_f", "points": 3, "score": 3}})
    written = nbformat.v4.new_markdown_cell("YOUR ANSWER HERE", metadata={"nbgrader": {
        "grade": True, "solution": True, "locked": False, "grade_id": "written-why", "points": 2, "score": 0}})
    written.metadata.nbgrader["checksum"] = compute_checksum(written)  # as released
    written.source = answer
    # GetGradesAndPending's note: a changed answer has no score until a person gives one
    written.metadata[PENDING] = compute_checksum(written) != written.metadata.nbgrader["checksum"]
    nb = nbformat.v4.new_notebook(cells=[test, written])
    config = GenerateFeedback().config  # nbgrader's, with the course's page as the grader configures it
    config.FeedbackExporter.template_name, config.FeedbackExporter.extra_template_basedirs = TEMPLATE_NAME, TEMPLATE_DIRS
    exporter = FeedbackExporter(config=config)
    page, _ = exporter.from_notebook_node(nb, resources={"nbgrader": {"notebook": "nb", "score": 3, "max_score": 5,
                                                                       "late_penalty": 0}})
    return _text(page)


def test_a_written_answer_awaiting_a_person_is_graded_by_hand_later_not_zero():
    text = _graded_page("Because the variance grows like d_k.")
    assert "Because the variance grows like d_k." in text
    assert "Written response (graded by hand later (2 points))" in text
    assert "Graded by hand later (2 points)" in text and "Score: 0.0 / 2.0" not in text
    # left out of both the score and the maximum, as on every page of the service (service/scores.py)
    assert "(Score: 3 / 3; written answer: pending (2 points))" in text
    assert "Score: 3.0 / 3.0" in text  # the test cell keeps its score


def test_an_answer_left_as_released_keeps_nbgraders_zero():
    text = _graded_page("YOUR ANSWER HERE")
    assert "graded by hand" not in text.lower() and "Score: 0.0 / 2.0" in text
