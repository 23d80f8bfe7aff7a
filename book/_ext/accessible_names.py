"""Every control of the site is named by what it shows (axe-core's label-content-name-mismatch,
a serious violation: speech-input users say the visible text to press a control).

The theme and myst-nb write three controls whose aria-label hides their visible text: the
folded code cells' ``<summary aria-label="Toggle hidden content">`` ("Show code cell source"),
the search field's ``aria-label="Search"`` ("Search Ctrl+K") and the colour-mode button's icons,
whose titles ("Light", "Dark") are not in its label "Color mode". After the build, each page's
HTML is rewritten: those two aria-labels are dropped (the visible text names the control), and
the icons lose their titles (the button's label and tooltip, "Color mode", name it). tests/test_browser.py runs axe-core on every page.
"""
from __future__ import annotations

import re
from pathlib import Path

FIXES = [
    (re.compile(r'<summary aria-label="Toggle hidden content">'), "<summary>"),
    (re.compile(r'(<button class="btn search-button-field search-button__button[^"]*"[^>]*?) aria-label="Search"'), r"\1"),
    # Font Awesome turns an icon's title into an SVG <title>, which counts as the button's text
    (re.compile(r'(<i class="theme-switch [^>]*?) title="[^"]*"'), r"\1"),
]


def name_controls_by_their_text(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    for page in Path(app.outdir).rglob("*.html"):
        text = original = page.read_text(encoding="utf-8")
        for pattern, replacement in FIXES:
            text = pattern.sub(replacement, text)
        if text != original:
            page.write_text(text, encoding="utf-8")


def setup(app):
    app.connect("build-finished", name_controls_by_their_text)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
