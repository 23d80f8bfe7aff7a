"""The built site opened in a real browser with no network (headless Chromium over the DevTools
protocol, tests/headless.py): the fixtures and helpers of tests/test_browser.py (every page) and
tests/test_browser_interactives.py (what a reader does on a page). Two files, so that the two test
processes of `make test` share the browser's work at the end of the session.

Needs Chromium (Debian: apt-get install chromium, which `make setup` does as root):
without it these tests skip, except when CI is set, where they fail.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import threading
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

from headless import Chromium, Page, find_chromium
from classroom import REPO
from classroom.site import chapter_notebooks

ARTIFACTS = REPO / "test-artifacts" / "browser"  # a folder per test file

PAGES = chapter_notebooks().pages()
CHAPTERS = [p for p in PAGES if re.fullmatch(r"book/\d\d-[^/]+", p)]


# -- browser and server --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def artifacts(request) -> Path:
    """The test file's folder of screenshots (and the browser's log), emptied first."""
    folder = ARTIFACTS / request.module.__name__
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def chromium_executable() -> str:
    """Chromium's path; without it, the test skips (or fails where CI is set)."""
    executable = find_chromium()
    if executable is None:
        message = "headless Chromium not found (Debian: apt-get install chromium, or set CHROMIUM=/path/to/it)"
        if os.environ.get("CI"):
            pytest.fail(message + "; CI must have it: `make setup` installs it as root", pytrace=False)
        pytest.skip(message)
    return executable


@pytest.fixture(scope="module")
def chromium(tmp_path_factory, artifacts) -> Iterator[Chromium]:
    with Chromium(chromium_executable(), tmp_path_factory.mktemp("chromium-profile"),
                  artifacts / "chromium.log") as browser:
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


@pytest.fixture(scope="module")
def site_url(site, chromium) -> Iterator[str]:  # `site`: tests/head_start.py, through conftest.py
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


def screenshot_path(artifacts: Path, name: str) -> Path:
    return artifacts / (name.replace("/", "__") + ".png")
