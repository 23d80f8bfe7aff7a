"""The built site in a real browser with no network: headless Chromium over the DevTools protocol.

Every page of the table of contents is served from 127.0.0.1 and must load nothing
from anywhere else (host names do not even resolve in this browser), fail no request,
throw no JavaScript error, typeset all its math with the site's own MathJax (no raw
`$$` left) and load every image. Chapters must have math and figures; every interactive
figure (slider or checkbox) must redraw its plot; exercise and chapter pages must open
their notebook in Colab.
A screenshot of each page goes to test-artifacts/browser/.

Needs Chromium (Debian: apt-get install chromium, which `make setup` does as root):
without it these tests skip, except when CI is set, where they fail.
"""
from __future__ import annotations

import functools
import html
import json
import os
import re
import shutil
import threading
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

import pytest
import yaml

from headless import Chromium, Page, find_chromium
from classroom import REPO
from classroom.site import chapter_notebooks

pytestmark = pytest.mark.slow  # runs kernels, the CLI, a server or a browser

ARTIFACTS = REPO / "test-artifacts" / "browser"
CONFIG = yaml.safe_load((REPO / "_config.yml").read_text())


PAGES = chapter_notebooks().pages()
CHAPTERS = [p for p in PAGES if re.fullmatch(r"book/\d\d-[^/]+", p)]
EXERCISES = [p for p in PAGES if p.startswith("exercises/")]
# The kernel-free interactive figures (book/plots.py: bar_slider, explorer) each chapter must have.
INTERACTIVES = {
    "book/01-self-attention": ["temperature"],
    "book/02-softmax-scaling": ["slider-std", "slider-dk"],
    "book/05-masks": ["mask-builder"],
    "book/06-encoder": ["positional-encoding"],
    "book/08-decoder": ["heads"],
}


# -- browser and server --------------------------------------------------------------------------
@pytest.fixture(scope="session")
def chromium(tmp_path_factory) -> Iterator[Chromium]:
    executable = find_chromium()
    if executable is None:
        message = "headless Chromium not found (Debian: apt-get install chromium, or set CHROMIUM=/path/to/it)"
        if os.environ.get("CI"):
            pytest.fail(message + "; CI must have it: `make setup` installs it as root", pytrace=False)
        pytest.skip(message)
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    with Chromium(executable, tmp_path_factory.mktemp("chromium-profile"), ARTIFACTS / "chromium.log") as browser:
        yield browser


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args) -> None:  # noqa: A002 - the stdlib's signature
        pass


@contextmanager
def serve(root: Path) -> Iterator[str]:
    """Serve a folder on 127.0.0.1 (a free port) from a thread; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, name="site-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="session")
def site_url(site, chromium) -> Iterator[str]:  # noqa: F811 - `site` is the imported fixture
    # Depends on `chromium` so that the browser is started before the server's thread.
    with serve(site) as url:
        yield url


@contextmanager
def opened(browser: Chromium, url: str) -> Iterator[Page]:
    page = browser.new_page()
    try:
        page.goto(url)
        settle(page)
        yield page
    finally:
        page.close()


def settle(page: Page, timeout: float = 30) -> None:
    """Wait for MathJax's first typesetting, every image, web fonts and ipywidgets."""
    page.evaluate("""(async () => {
        if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
        await Promise.all([...document.images].map(img => {
            img.loading = "eager";
            return img.decode().catch(() => null);
        }));
        await document.fonts.ready;
        const views = [...document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')];
        const shown = () => views.every(v => {
            const area = v.previousElementSibling;
            return area && area.classList.contains("widget-subarea") && area.childElementCount > 0;
        });
        for (let i = 0; i < 100 && !shown(); i++) await new Promise(r => setTimeout(r, 100));
        await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
        return true;
    })()""", timeout=timeout)


def artifact(name: str) -> Path:
    return ARTIFACTS / (name.replace("/", "__") + ".png")


# -- what a page must show -------------------------------------------------------------------------
PAGE_REPORT = """(() => {
    const math = [...document.querySelectorAll(".math")];
    const body = document.body.cloneNode(true);
    body.querySelectorAll("pre, code, script, style, textarea, mjx-container, .highlight").forEach(e => e.remove());
    const text = body.textContent;
    const raw = ["$$", "\\\\(", "\\\\[", "\\\\begin{"].flatMap(d => {
        const at = text.indexOf(d);
        return at < 0 ? [] : [JSON.stringify(text.slice(Math.max(0, at - 40), at + 60))];
    });
    const views = [...document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')];
    return {
        mathjax: window.MathJax && MathJax.version || null,
        math: math.length,
        typeset: document.querySelectorAll(".math mjx-container, mjx-container").length,
        untypeset: math.filter(m => !m.querySelector("mjx-container")).map(m => m.textContent.slice(0, 80)),
        tex_errors: [...document.querySelectorAll("mjx-merror")].map(e => e.getAttribute("data-mjx-error") || e.textContent),
        raw_tex: raw,
        images: [...document.images].map(i => ({src: i.getAttribute("src"), width: i.naturalWidth, ok: i.complete && i.naturalWidth > 0})),
        content_images: document.querySelectorAll("article img").length,
        widgets: views.length,
        widgets_shown: views.filter(v => v.previousElementSibling && v.previousElementSibling.childElementCount > 0).length,
    };
})()"""


def remote_requests(page: Page, base: str) -> list[str]:
    """Requests to anything but the local server (data:, blob: and about: URLs load nothing)."""
    return [u for u in page.requests
            if urlsplit(u).scheme in {"http", "https", "ws", "wss", "ftp"} and not u.startswith(base)]


@pytest.mark.parametrize("page_name", PAGES)
def test_page_renders_offline(chromium, site_url, page_name):
    with opened(chromium, site_url + page_name + ".html") as page:
        page.screenshot(artifact(page_name))
        report = page.evaluate(PAGE_REPORT)
        problems = []
        if remote := remote_requests(page, site_url):
            problems.append(f"loads from the network: {remote}")
        # Chromium asks every site for /favicon.ico; the book has none.
        if failed := [f for f in page.failures if not f.endswith("/favicon.ico")]:
            problems.append(f"failed requests: {failed}")
        if uncaught := [e for e in page.errors if e.startswith("uncaught")]:
            problems.append(f"JavaScript errors: {uncaught}")
        if report["math"] and not report["mathjax"]:
            problems.append("the page has math but MathJax did not load")
        if report["untypeset"]:
            problems.append(f"{len(report['untypeset'])} math elements not typeset, e.g. {report['untypeset'][:3]}")
        if report["tex_errors"]:
            problems.append(f"TeX errors: {report['tex_errors'][:5]}")
        if report["raw_tex"]:
            problems.append(f"raw TeX delimiters in the text: {report['raw_tex']}")
        if broken := [i["src"] for i in report["images"] if not i["ok"]]:
            problems.append(f"images that did not load: {broken}")
        if report["widgets_shown"] < report["widgets"]:
            problems.append(f"{report['widgets'] - report['widgets_shown']} of {report['widgets']} widgets not shown")
        if page_name in CHAPTERS:
            if not report["typeset"]:
                problems.append("a chapter without typeset math (no MathJax output elements)")
            if not report["content_images"]:
                problems.append("a chapter without figures")
        if problems:
            pytest.fail(f"{page_name} (screenshot {artifact(page_name)}):\n  " + "\n  ".join(problems), pytrace=False)


# -- Colab ---------------------------------------------------------------------------------------
def colab_url(notebook: str) -> str:
    repo = CONFIG["repository"]["url"].removeprefix("https://github.com/").strip("/")
    return (f"{CONFIG['launch_buttons']['colab_url'].rstrip('/')}/github/{repo}/blob/"
            f"{CONFIG['repository']['branch']}/{notebook}")


def colab_links(chromium, site_url, page_name: str) -> list[dict]:
    """The page's links to Colab, and whether each is in the launch menu (the rocket)."""
    with opened(chromium, site_url + page_name + ".html") as page:
        return page.evaluate("""[...document.querySelectorAll('a[href*="colab.research.google.com"]')]
            .map(a => ({href: a.href, launch: !!a.closest(".dropdown-launch-buttons")}))""")


@pytest.mark.skipif(not EXERCISES, reason="no exercise page in _toc.yml yet")
@pytest.mark.parametrize("page_name", EXERCISES)
def test_exercise_page_opens_its_notebook_in_colab(chromium, site_url, page_name):
    notebook = f"{page_name}.ipynb"
    assert (REPO / notebook).is_file(), f"{notebook}: the Colab link would point at a missing notebook"
    links = colab_links(chromium, site_url, page_name)
    assert links == [{"href": colab_url(notebook), "launch": True}], links
    assert re.fullmatch(r"https://colab\.research\.google\.com/github/[\w.-]+/[\w.-]+/blob/[\w./-]+"
                        r"/exercises/[\w.-]+/[\w.-]+\.ipynb", links[0]["href"]), links[0]["href"]


@pytest.mark.parametrize("page_name", CHAPTERS)
def test_chapter_page_opens_its_notebook_in_colab(chromium, site_url, page_name):
    # The chapter's notebook (book/_ext/chapter_notebooks.py), not its MyST Markdown source.
    notebook = f"{page_name}.ipynb"
    assert (REPO / notebook).is_file(), f"{notebook}: the Colab link would point at a missing notebook"
    links = colab_links(chromium, site_url, page_name)
    assert links == [{"href": colab_url(notebook), "launch": True}], links


@pytest.mark.parametrize("page_name", [p for p in PAGES if not p.startswith("exercises/") and p not in CHAPTERS])
def test_no_launch_buttons_on_other_markdown_pages(site, page_name):  # noqa: F811
    # Colab, Binder, ... cannot open a MyST Markdown page that has no notebook: no rocket menu there.
    source = (site / f"{page_name}.html").read_text()
    assert "dropdown-launch-buttons" not in source
    assert not re.search(r"colab\.research\.google\.com/[^\"]*\.md\b", source)


@pytest.mark.parametrize("page_name", CHAPTERS)
def test_chapter_pages_never_link_colab_to_markdown(site, page_name):  # noqa: F811
    assert not re.search(r"colab\.research\.google\.com/[^\"]*\.md\b", (site / f"{page_name}.html").read_text())


def test_no_cdn_in_the_built_site(site):  # noqa: F811
    """No page loads a script, stylesheet, font, image or frame from another host, nor names
    a CDN in an inline script (links to other sites are fine). The browser test above checks
    what pages actually request; the vendored MathJax and widget manager keep CDN URLs only
    as fallbacks that these pages never use."""
    tag = re.compile(r"<(script|link|img|iframe|source|embed|object)\b([^>]*)>", re.I)
    remote = re.compile(r"\b(?:src|href|data)=\"((?:https?:)?//[^\"]+)\"", re.I)
    inline = re.compile(r"<script\b[^>]*>(.*?)</script>", re.I | re.S)
    cdn = re.compile(r"cdn\.jsdelivr|cdnjs|unpkg\.com|polyfill\.io|googleapis|THEBE_JS_URL")
    offenders = {}
    for path in site.rglob("*.html"):
        text = path.read_text(errors="replace")
        found = [f"<{name} {url}>" for name, attrs in tag.findall(text) for url in remote.findall(attrs)
                 if not (name.lower() == "link" and re.search(r"rel=\"(?:canonical|alternate)\"", attrs))]
        found += [f"inline script naming {m.group(0)}" for body in inline.findall(text) for m in cdn.finditer(body)]
        if found:
            offenders[str(path.relative_to(site))] = found
    assert not offenders, offenders
    for asset in ("mathjax/tex-mml-chtml.js", "requirejs/require.js", "jupyter-widgets/embed-amd.js"):
        assert (site / "_static" / asset).is_file(), asset


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


def check_sliders(page: Page, name: str) -> int:
    """Move each input.course-slider to both ends with the keyboard; its .course-slider-plot must change.

    The plot is the .course-slider-plot in the smallest element around the slider that
    has one. Screenshots of the plot at both ends go to test-artifacts/browser/.
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
            shots[key] = (box["value"], page.screenshot(artifact(f"{name}--slider{i}-{key.lower()}"), clip=clip))
            page.evaluate(f'document.querySelectorAll("input.course-slider")[{i}].style.visibility = ""')
            page.evaluate(f'document.querySelectorAll("input.course-slider")[{i}].focus()')
        (low, low_png), (high, high_png) = shots["Home"], shots["End"]
        assert low != high, f"{name}: slider {i} does not move with the Home/End keys (value {low})"
        assert low_png != high_png, (f"{name}: slider {i} moved from {low} to {high} but its plot did not change "
                                     f"(see {artifact(f'{name}--slider{i}-home')})")
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


def test_slider_check_on_fixture_pages(chromium, tmp_path):
    """The slider check passes a slider that swaps its plot, and catches one that does not."""
    (tmp_path / "wired.html").write_text(_slider_fixture(wired=True))
    (tmp_path / "unwired.html").write_text(_slider_fixture(wired=False))
    with serve(tmp_path) as url:
        with opened(chromium, url + "wired.html") as page:
            assert check_sliders(page, "fixtures/wired") == 1
        with opened(chromium, url + "unwired.html") as page:
            with pytest.raises(AssertionError, match="plot did not change"):
                check_sliders(page, "fixtures/unwired")


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


def check_toggles(page: Page, name: str) -> int:
    """Click each input.course-toggle on and off with the mouse; its explorer's plot must change and come back.

    Screenshots of the plot before and after the click go to test-artifacts/browser/.
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
            shots.append((box["state"], page.screenshot(artifact(f"{name}--toggle{i}-{step}"), clip=clip)))
            if step < 2:
                click(page, setup["x"], setup["y"])
        (state0, png0), (state1, png1), (state2, png2) = shots
        assert state0 != state1, f"{name}: checkbox {i} did not change its explorer's state ({state0})"
        assert png0 != png1, (f"{name}: checkbox {i} changed the state to {state1} but the plot did not change "
                              f"(see {artifact(f'{name}--toggle{i}-0')})")
        assert (state2, png2) == (state0, png0), f"{name}: checkbox {i} clicked twice does not restore the plot"
    return count


@pytest.mark.parametrize("page_name", [p for p in INTERACTIVES if p in PAGES])
def test_interactives_move_their_plots(chromium, site_url, page_name):
    """Every interactive figure of the chapter is there, and each slider and checkbox redraws its plot."""
    with opened(chromium, site_url + page_name + ".html") as page:
        found = page.evaluate("""[...document.querySelectorAll(".course-slider-widget, .course-explorer")]
            .map(e => e.id)""")
        assert found == INTERACTIVES[page_name], f"{page_name}: interactive figures {found}"
        sliders = check_sliders(page, page_name)
        toggles = check_toggles(page, page_name)
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
