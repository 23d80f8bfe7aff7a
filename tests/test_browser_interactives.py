"""What a reader does on the built site's pages, in a real browser with no network (tests/browsing.py):
every interactive figure redraws its plot when its slider moves (keyboard) or its checkbox is
clicked (mouse), and the answers that end chapters 01-06 unfold with a click. Screenshots of the
plots go to test-artifacts/browser/test_browser_interactives/.
"""
from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from browsing import CHAPTERS, PAGES, opened, screenshot_path, serve
from headless import Page

pytestmark = pytest.mark.slow  # runs a server and a browser

# The kernel-free interactive figures (book/plots.py: bar_slider, explorer) each chapter must have.
INTERACTIVES = {
    "book/01-self-attention": ["temperature"],
    "book/02-softmax-scaling": ["slider-std", "slider-dk"],
    "book/05-masks": ["mask-builder"],
    "book/06-encoder": ["positional-encoding"],
    "book/08-decoder": ["heads"],
    "book/09-attention-at-scale": ["online-softmax"],
}


# -- sliders ------------------------------------------------------------------------------------
SLIDER_SETUP = """((i) => {
    const slider = document.querySelectorAll("input.course-slider")[i];
    let box = slider;
    while (box && !box.querySelector(".course-slider-plot")) box = box.parentElement;
    const plot = box && box.querySelector(".course-slider-plot");
    if (!plot) return null;
    plot.scrollIntoView({block: "center"});
    slider.focus();
    return {type: slider.type, min: slider.min, max: slider.max, value: slider.value,
            focused: document.activeElement === slider};
})"""

PLOT_BOX = """(async (i) => {
    const slider = document.querySelectorAll("input.course-slider")[i];
    let box = slider;
    while (!box.querySelector(".course-slider-plot")) box = box.parentElement;
    const plot = box.querySelector(".course-slider-plot");
    await Promise.all([...plot.querySelectorAll("img"), ...(plot.tagName === "IMG" ? [plot] : [])]
        .map(img => img.decode().catch(() => null)));
    await new Promise(r => setTimeout(r, 150));
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    const r = plot.getBoundingClientRect();
    return {value: slider.value, x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height};
})"""


def check_sliders(page: Page, name: str, folder: Path) -> int:
    """Move each input.course-slider to both ends with the keyboard; its .course-slider-plot must change.

    The plot is the .course-slider-plot in the smallest element around the slider that
    has one. Screenshots of the plot at both ends go to ``folder``.
    Returns the number of sliders.
    """
    count = page.evaluate('document.querySelectorAll("input.course-slider").length')
    assert count, f"{name}: no input.course-slider"
    for i in range(count):
        setup = page.evaluate(f"{SLIDER_SETUP}({i})")
        assert setup, f"{name}: slider {i} has no .course-slider-plot around it"
        assert setup["type"] == "range", f"{name}: slider {i} is an <input type={setup['type']}>"
        assert setup["focused"], f"{name}: slider {i} cannot take the keyboard focus"
        shots = {}
        for key, code in (("Home", 36), ("End", 35)):
            page.press(key, code)
            box = page.evaluate(f"{PLOT_BOX}({i})")
            assert box["width"] > 0 and box["height"] > 0, f"{name}: slider {i}: its plot is not visible"
            clip = {k: box[k] for k in ("x", "y", "width", "height")}
            # Hide the slider itself, in case the plot's box contains it: only the plot counts.
            page.evaluate(f'document.querySelectorAll("input.course-slider")[{i}].style.visibility = "hidden"')
            shot = screenshot_path(folder, f"{name}--slider{i}-{key.lower()}")
            shots[key] = (box["value"], page.screenshot(shot, clip=clip))
            page.evaluate(f'document.querySelectorAll("input.course-slider")[{i}].style.visibility = ""')
            page.evaluate(f'document.querySelectorAll("input.course-slider")[{i}].focus()')
        (low, low_png), (high, high_png) = shots["Home"], shots["End"]
        assert low != high, f"{name}: slider {i} does not move with the Home/End keys (value {low})"
        assert low_png != high_png, (f"{name}: slider {i} moved from {low} to {high} but its plot did not change "
                                     f"(see {screenshot_path(folder, f'{name}--slider{i}-home')})")
    return count


def _frame(height: int, color: str) -> str:
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="240" height="120">'
           f'<rect width="240" height="120" fill="white"/>'
           f'<rect x="100" y="{120 - height}" width="40" height="{height}" fill="{color}"/></svg>')
    return "data:image/svg+xml," + svg.replace("#", "%23").replace('"', "'")


def _slider_fixture(wired: bool) -> str:
    frames = [_frame(20 + 20 * k, c) for k, c in enumerate(["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"])]
    script = f"""<script>
      const frames = {json.dumps(frames)};
      document.querySelectorAll("input.course-slider").forEach(s => s.addEventListener("input", () => {{
        s.closest("figure").querySelector(".course-slider-plot").src = frames[s.value];
      }}));
    </script>""" if wired else ""
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>slider fixture</title></head><body>
      <p>A static slider: precomputed frames, one shown at a time.</p>
      <figure><img class="course-slider-plot" alt="plot" src="{html.escape(frames[2])}">
        <label>temperature <input class="course-slider" type="range" min="0" max="4" step="1" value="2"></label>
      </figure>{script}</body></html>"""


def test_slider_check_on_fixture_pages(chromium, artifacts, tmp_path):
    """The slider check passes a slider that swaps its plot, and catches one that does not."""
    (tmp_path / "wired.html").write_text(_slider_fixture(wired=True))
    (tmp_path / "unwired.html").write_text(_slider_fixture(wired=False))
    with serve(tmp_path) as url:
        with opened(chromium, url + "wired.html") as page:
            assert check_sliders(page, "fixtures/wired", artifacts) == 1
        with opened(chromium, url + "unwired.html") as page:
            with pytest.raises(AssertionError, match="plot did not change"):
                check_sliders(page, "fixtures/unwired", artifacts)


TOGGLE_SETUP = """((i) => {
    const toggle = document.querySelectorAll("input.course-toggle")[i];
    const box = toggle.closest(".course-explorer");
    const plot = box && box.querySelector(".course-slider-plot");
    if (!plot) return null;
    plot.scrollIntoView({block: "center"});
    const t = toggle.getBoundingClientRect();
    return {type: toggle.type, checked: toggle.checked, x: t.left + t.width / 2, y: t.top + t.height / 2,
            state: plot.getAttribute("data-state")};
})"""

PLOT_OF_TOGGLE = """((i) => {
    const plot = document.querySelectorAll("input.course-toggle")[i].closest(".course-explorer")
        .querySelector(".course-slider-plot");
    const r = plot.getBoundingClientRect();
    return {x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height,
            state: plot.getAttribute("data-state")};
})"""


def click(page: Page, x: float, y: float) -> None:
    """A real left click at viewport coordinates (x, y)."""
    for kind in ("mousePressed", "mouseReleased"):
        page.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})


def check_toggles(page: Page, name: str, folder: Path) -> int:
    """Click each input.course-toggle on and off with the mouse; its explorer's plot must change and come back.

    Screenshots of the plot before and after the click go to ``folder``.
    Returns the number of checkboxes.
    """
    count = page.evaluate('document.querySelectorAll("input.course-toggle").length')
    for i in range(count):
        setup = page.evaluate(f"{TOGGLE_SETUP}({i})")
        assert setup, f"{name}: checkbox {i} has no .course-slider-plot in its .course-explorer"
        assert setup["type"] == "checkbox", f"{name}: toggle {i} is an <input type={setup['type']}>"
        shots = []
        for step in range(3):  # before, after one click, after a second click
            box = page.evaluate(f"{PLOT_OF_TOGGLE}({i})")
            page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            clip = {k: box[k] for k in ("x", "y", "width", "height")}
            shot = screenshot_path(folder, f"{name}--toggle{i}-{step}")
            shots.append((box["state"], page.screenshot(shot, clip=clip)))
            if step < 2:
                click(page, setup["x"], setup["y"])
        (state0, png0), (state1, png1), (state2, png2) = shots
        assert state0 != state1, f"{name}: checkbox {i} did not change its explorer's state ({state0})"
        assert png0 != png1, (f"{name}: checkbox {i} changed the state to {state1} but the plot did not change "
                              f"(see {screenshot_path(folder, f'{name}--toggle{i}-0')})")
        assert (state2, png2) == (state0, png0), f"{name}: checkbox {i} clicked twice does not restore the plot"
    return count


@pytest.mark.parametrize("page_name", [p for p in INTERACTIVES if p in PAGES])
def test_interactives_move_their_plots(chromium, site_url, artifacts, page_name):
    """Every interactive figure of the chapter is there, and each slider and checkbox redraws its plot."""
    with opened(chromium, site_url + page_name + ".html") as page:
        found = page.evaluate("""[...document.querySelectorAll(".course-slider-widget, .course-explorer")]
            .map(e => e.id)""")
        assert found == INTERACTIVES[page_name], f"{page_name}: interactive figures {found}"
        sliders = check_sliders(page, page_name, artifacts)
        toggles = check_toggles(page, page_name, artifacts)
        assert sliders + toggles >= len(found)
        assert not [e for e in page.errors if e.startswith("uncaught")], page.errors


# -- check your understanding ---------------------------------------------------------------------
ANSWERS = """(() => {
    const section = document.getElementById("check-your-understanding");
    if (!section) return null;
    return [...section.querySelectorAll(".dropdown.admonition")].map(a => {
        const body = [...a.children].filter(c => !c.classList.contains("admonition-title")
                                               && !c.classList.contains("toggle-button"));
        return {visible: body.some(c => c.offsetHeight > 0 && getComputedStyle(c).visibility !== "hidden"),
                text: body.map(c => c.textContent).join(" ").trim().length};
    });
})()"""

ANSWER_TITLE = """((i) => {
    const a = document.getElementById("check-your-understanding").querySelectorAll(".dropdown.admonition")[i];
    const t = a.querySelector("button.toggle-button") || a.querySelector(".admonition-title");
    t.scrollIntoView({block: "center"});
    const r = t.getBoundingClientRect();
    return {x: r.left + Math.min(40, r.width / 2), y: r.top + r.height / 2};
})"""


@pytest.mark.parametrize("page_name", [p for p in CHAPTERS if "01" <= p[5:7] <= "06"])
def test_chapter_ends_with_questions_whose_answers_unfold(chromium, site_url, page_name):
    """Chapters 01-06 end with 3-5 questions; each answer is folded away and opens with a click."""
    with opened(chromium, site_url + page_name + ".html") as page:
        answers = page.evaluate(ANSWERS)
        assert answers is not None, f"{page_name}: no 'Check your understanding' section"
        assert 3 <= len(answers) <= 5, f"{page_name}: {len(answers)} questions"
        assert all(a["text"] > 20 for a in answers), answers
        assert not any(a["visible"] for a in answers), f"{page_name}: an answer is shown before it is opened"
        for i in range(len(answers)):
            at = page.evaluate(f"{ANSWER_TITLE}({i})")
            click(page, at["x"], at["y"])
        page.evaluate("new Promise(r => setTimeout(r, 400))")
        opened_now = page.evaluate(ANSWERS)
        assert all(a["visible"] for a in opened_now), f"{page_name}: answers that do not open: {opened_now}"
