"""The feedback exporter: nbconvert's page, faster, with the same text and alt texts."""
from __future__ import annotations

import copy
import html
import re
from pathlib import Path

import nbformat
import pytest
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


def _course_cell(cell: nbformat.NotebookNode, **nbgrader) -> nbformat.NotebookNode:
    cell.metadata["nbgrader"] = {"grade": False, "solution": False, "locked": True, "grade_id": cell.id, **nbgrader}
    return cell


SETUP = "try:\n    from attention_checks.core import check\nexcept ImportError:\n    raise\nprint('PyTorch, tests run on cpu')"


def _test_cell() -> nbformat.NotebookNode:
    return _course_cell(nbformat.v4.new_code_cell("check(f)"), grade=True, grade_id="test_f", points=3, score=3)


def _course_page(*cells: nbformat.NotebookNode) -> str:
    """A feedback page of the course's template (nbgrader's, extended), as the grader configures
    it, for an autograded notebook of ``cells`` (its score 3 of 5)."""
    from nbgrader.converters import GenerateFeedback

    nb = nbformat.v4.new_notebook(cells=list(cells))
    nb.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3"}
    config = GenerateFeedback().config  # nbgrader's, with the course's page as the grader configures it
    config.FeedbackExporter.template_name, config.FeedbackExporter.extra_template_basedirs = TEMPLATE_NAME, TEMPLATE_DIRS
    exporter = FeedbackExporter(config=config)
    page, _ = exporter.from_notebook_node(nb, resources={"nbgrader": {"notebook": "nb", "score": 3, "max_score": 5,
                                                                       "late_penalty": 0}})
    return page


def _graded_page(answer: str) -> str:
    """The text of a course page with a test cell with its points and a written answer (solution and
    grade cell) with the checksum of its release."""
    from nbgrader.utils import compute_checksum

    written = nbformat.v4.new_markdown_cell("YOUR ANSWER HERE", metadata={"nbgrader": {
        "grade": True, "solution": True, "locked": False, "grade_id": "written-why", "points": 2, "score": 0}})
    written.metadata.nbgrader["checksum"] = compute_checksum(written)  # as released
    written.source = answer
    # GetGradesAndPending's note: a changed answer has no score until a person gives one
    written.metadata[PENDING] = compute_checksum(written) != written.metadata.nbgrader["checksum"]
    return _text(_course_page(_test_cell(), written))


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


# -- the page's math, setup cell and index ------------------------------------------------------------
def _setup_cell(*outputs) -> nbformat.NotebookNode:
    return _course_cell(nbformat.v4.new_code_cell(SETUP, outputs=list(outputs)))


def test_the_course_page_loads_no_script_of_its_own_and_names_no_cdn():
    """nbgrader's page loads MathJax 2 from cdnjs; the course's page loads nothing: where it is shown,
    the course's own MathJax is added (the service's, or the copy `grade` writes beside its pages)."""
    page = _course_page(_course_cell(nbformat.v4.new_markdown_cell("The scores $QK^T / \\sqrt{d_k}$")), _test_cell())
    assert "<script" not in page and "cdnjs" not in page
    assert "$QK^T / \\sqrt{d_k}$" in page  # the TeX, for MathJax to typeset


def test_the_setup_cell_is_folded_and_open_where_it_failed():
    printed = nbformat.v4.new_output("stream", name="stdout", text="PyTorch, tests run on cpu\n")
    page = _course_page(_setup_cell(printed), _test_cell())
    (folded,) = re.findall(r"<details class=\"setup-cell\"( open)?>\s*<summary>(.*?)</summary>(.*?)</details>", page, re.S)
    opened, summary, inside = folded
    assert not opened and summary == "The setup cell (it imports the checks)"
    assert "attention_checks" in _text(inside) and "PyTorch, tests run on cpu" in _text(inside)
    assert "check ( f )" not in _text(inside)  # the test cell is not in it

    failed = nbformat.v4.new_output("error", ename="ImportError", evalue="Could not install", traceback=["ImportError"])
    page = _course_page(_setup_cell(failed), _test_cell())
    assert page.count('<details class="setup-cell" open>') == 1
    # a student's cell that imports the checks is theirs, not the setup cell
    student = nbformat.v4.new_code_cell(SETUP)
    assert "<details" not in _course_page(student, _test_cell())


def test_the_index_names_each_test_cell_and_links_to_it_with_its_points():
    hidden = _course_cell(nbformat.v4.new_code_cell("check(g)"), grade=True, grade_id="test_g_hidden", points=2, score=0)
    page = _course_page(_setup_cell(), _test_cell(), hidden)
    index = re.search(r'<div id="toc">(.*?)</div>', page, re.S)[1]
    assert _text(index) == "Test cell test_f (Score: 3.0 / 3.0) Test cell test_g_hidden (Score: 0.0 / 2.0)"
    for grade_id in ("test_f", "test_g_hidden"):
        assert f'<a href="#{grade_id}">Test cell <code>{grade_id}</code></a>' in index
        assert page.count(f'<a name="{grade_id}"></a>') == 1  # where the link goes: the test cell's heading


def _written_by_grade(out, page: str) -> Path:
    """``page`` written into ``out`` as `grade` writes it: RESULTS/feedback/<student>/<assignment>/."""
    from autograder.report import ResultsWriter
    from autograder.results import NotebookResult

    writer = ResultsWriter(out)
    writer.add(NotebookResult("ann", "01-self-attention", "nb", "ok", 3, 5), page)
    writer.finish()
    return out / "feedback" / "ann" / "01-self-attention" / "nb.html"


@pytest.mark.slow  # a browser
def test_a_page_grade_wrote_typesets_its_math_offline_from_the_copy_beside_it(chromium, tmp_path):
    """Opened from its file in headless Chromium (no network): the course's math typeset by the
    course's MathJax, copied into RESULTS/feedback/.mathjax, which is all the page loads; MathJax's
    Safe extension drops a javascript: link in a student's math; the page passes axe-core."""
    from classroom import axe

    course = _course_cell(nbformat.v4.new_markdown_cell("# Scores\n\nThe weights $\\operatorname{softmax}(QK^T / \\sqrt{d_k})$"
                                                        " and $$\\sum_j w_{ij} = 1$$"))
    student = nbformat.v4.new_markdown_cell("mine: $\\href{javascript:console.error('PWNED:href')}{x}$")
    out = tmp_path / "RESULTS"
    path = _written_by_grade(out, _course_page(course, _setup_cell(), _test_cell(), student))
    page = chromium.new_page()
    try:
        page.goto(path.as_uri())
        report = page.evaluate("""(async () => {
            await MathJax.startup.promise;
            return {typeset: document.querySelectorAll("mjx-container svg").length, errors: document.querySelectorAll("mjx-merror").length,
                    tex: document.body.innerText.includes("$"), links: [...document.querySelectorAll("mjx-container [href]")].length,
                    safe: MathJax.config.loader.load, folded: !document.querySelector("details.setup-cell").open};
        })()""")
        assert report == {"typeset": 3, "errors": 0, "tex": False, "links": 0, "safe": ["ui/safe"], "folded": True}, report
        assert not page.errors, page.errors
        copy = (out / "feedback" / ".mathjax").as_uri() + "/"
        loaded = {url.removeprefix(copy) for url in page.requests if url != path.as_uri()}
        assert {"mathjax-config.js", "tex-svg.js", "ui/safe.js"} <= loaded, page.requests
        assert all(url.startswith(copy) for url in page.requests if url != path.as_uri()), page.requests
        assert not axe.violations(page), axe.describe(axe.violations(page))
    finally:
        page.close()


def test_without_the_courses_mathjax_grade_writes_pages_that_show_tex_and_says_so(tmp_path, monkeypatch, capsys):
    from autograder import report

    monkeypatch.setattr(report, "WEB_ASSETS", tmp_path / "no-web-assets")
    page = _course_page(_course_cell(nbformat.v4.new_markdown_cell("$x_i$")), _test_cell())
    written = _written_by_grade(tmp_path / "RESULTS", page).read_text()
    assert written == page and not (tmp_path / "RESULTS" / "feedback" / ".mathjax").exists()
    assert "the feedback pages show their math as TeX" in capsys.readouterr().err
