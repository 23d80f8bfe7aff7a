"""The built site in a real browser with no network: headless Chromium over the DevTools protocol
(tests/browsing.py).

Every page of the table of contents is served from 127.0.0.1 and must load nothing
from anywhere else (host names do not even resolve in this browser), fail no request,
throw no JavaScript error, typeset all its math with the site's own MathJax (no raw
`$$` left), load every image and break no serious or critical rule of axe-core (an accessibility
checker, classroom/axe.py). Chapters must have math and figures; exercise and chapter
pages must open their notebook in Colab. A screenshot of each page goes to
test-artifacts/browser/test_browser/. What a reader does on a page (sliders, checkboxes, folded
answers) is tested in tests/test_browser_interactives.py.
"""
from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
import yaml

from browsing import CHAPTERS, PAGES, opened, screenshot_path
from classroom import REPO, axe
from headless import Page

pytestmark = pytest.mark.slow  # runs a server and a browser

CONFIG = yaml.safe_load((REPO / "_config.yml").read_text())
EXERCISES = [p for p in PAGES if p.startswith("exercises/")]


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
def test_page_renders_offline(chromium, site_url, artifacts, page_name):
    with opened(chromium, site_url + page_name + ".html") as page:
        shot = screenshot_path(artifacts, page_name)
        page.screenshot(shot)
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
        if found := axe.violations(page):
            problems.append(f"accessibility (axe-core, serious or critical):\n    " + axe.describe(found).replace("\n", "\n    "))
        if page_name in CHAPTERS:
            if not report["typeset"]:
                problems.append("a chapter without typeset math (no MathJax output elements)")
            if not report["content_images"]:
                problems.append("a chapter without figures")
        if problems:
            pytest.fail(f"{page_name} (screenshot {shot}):\n  " + "\n  ".join(problems), pytrace=False)


def test_axe_reports_what_keeps_a_reader_out(chromium):
    """The checker can fail: an image without alt text and an unlabelled field are critical."""
    html = '<html lang="en"><head><title>t</title></head><body><main><img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=">' \
           '<input type="text"></main></body></html>'
    with opened(chromium, "data:text/html," + html) as page:
        found = {v["id"] for v in axe.violations(page)}
    assert {"image-alt", "label"} <= found, found


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
