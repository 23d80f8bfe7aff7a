"""Make the built site work with no network, and keep launch buttons where they work.

Loaded through `sphinx.local_extensions` in _config.yml. It

- serves MathJax, RequireJS and the Jupyter widget manager from the site itself:
  the files that `tools/web_assets.py` (run by `make setup`) unpacked from the
  npm registry are copied into `_build/html/_static/` (as an html_static_path
  entry), and `mathjax_path` / myst-nb's `nb_ipywidgets_js` point there instead
  of at CDNs. The build stops with an error if the files are missing. On pages
  with ipywidgets, `static/jupyter-widgets-config.js` (beside this file) runs
  first: it lets the widget manager find its fonts and typeset with MathJax 3;
- drops sphinx-thebe's scripts, which name a CDN, while no Thebe ("live code")
  launch button is configured;
- removes the launch-button menu (Colab, Binder, ...) from pages whose source is
  neither an .ipynb file nor a .md file with an .ipynb beside it: Colab cannot
  open a .md file from GitHub. Exercise pages (.ipynb) keep their Colab button,
  and so do the chapters, whose notebooks book/_ext/chapter_notebooks.py writes.
"""
from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ExtensionError

MATHJAX = "mathjax/tex-mml-chtml.js"
REQUIREJS = "requirejs/require.js"
WIDGETS = "jupyter-widgets/embed-amd.js"
REQUIRED = (MATHJAX, REQUIREJS, WIDGETS)
WIDGETS_CONFIG = "jupyter-widgets-config.js"  # book/_ext/static/: lets embed-amd.js find its fonts


def _web_assets_module():
    """tools/web_assets.py, which knows where the files are installed and which versions are pinned."""
    path = Path(__file__).resolve().parents[2] / "tools" / "web_assets.py"
    spec = importlib.util.spec_from_file_location("course_web_assets", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def configure(app: Sphinx, config: Config) -> None:
    web_assets = _web_assets_module()
    assets = web_assets.default_dir()
    missing = [name for name in REQUIRED if not (assets / name).is_file()]
    if missing or not web_assets.is_installed(assets):
        raise ExtensionError(
            f"offline_assets: the site's JavaScript (MathJax, RequireJS, widget manager) is missing or "
            f"outdated in {assets}. Run `make setup`, or `python tools/web_assets.py` with the Python that "
            f"runs jupyter-book (needs npm once); set COURSE_WEB_ASSETS to use another folder.")
    static = Path(__file__).with_name("static")
    config.html_static_path.extend([str(assets), str(static)])
    # Sphinx copies static files only when it writes pages: a new pin or a changed script
    # changes this "html" config value, which makes the next build rewrite every page.
    digest = hashlib.sha256(web_assets.stamp_text().encode())
    for path in sorted(static.rglob("*")):
        if path.is_file():
            digest.update(path.name.encode() + path.read_bytes())
    config.offline_assets_digest = digest.hexdigest()
    config.mathjax_path = MATHJAX
    # Scripts myst-nb adds, in this order, to pages that show ipywidgets (paths relative
    # to _static/). data-jupyter-widgets-cdn replaces the manager's CDN fallback for
    # third-party widget modules (the standard ipywidgets are built in): offline, there is none.
    config.nb_ipywidgets_js = {
        WIDGETS_CONFIG: {},
        REQUIREJS: {},
        WIDGETS: {"data-jupyter-widgets-cdn": "_static/jupyter-widgets/cdn-disabled/"},
    }


def _thebe_enabled(app: Sphinx) -> bool:
    return bool(app.config.html_theme_options.get("launch_buttons", {}).get("thebe"))


def _script_name(script) -> str:
    return getattr(script, "filename", None) or str(script or "")


def _script_body(script) -> str:
    return (getattr(script, "attributes", None) or {}).get("body", "") or ""


def adjust_page(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    if not _thebe_enabled(app) and "script_files" in context:
        context["script_files"][:] = [
            s for s in context["script_files"]
            if not _script_name(s).endswith("sphinx-thebe.js") and "THEBE_JS_URL" not in _script_body(s)]
    source = Path(app.env.doc2path(pagename)) if pagename in app.env.all_docs else None
    # sphinx-book-theme points a .md page's launch buttons at the .ipynb of the same name
    # when there is one (the chapters: book/_ext/chapter_notebooks.py); keep those.
    if source is not None and source.suffix != ".ipynb" and not source.with_suffix(".ipynb").is_file():
        buttons = context.get("header_buttons")
        if buttons:
            buttons[:] = [b for b in buttons if b.get("label") != "launch-buttons"]


def setup(app: Sphinx) -> dict:
    app.add_config_value("offline_assets_digest", "", "html")
    app.connect("config-inited", configure)
    # After sphinx-book-theme has added its launch buttons (priority 501).
    app.connect("html-page-context", adjust_page, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
