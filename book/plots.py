"""Small plotting helpers shared by the chapters of "Attention from scratch".

The chapters run with the ``book/`` folder as their working directory and
import what they need with ``from plots import ...`` in a hidden cell. Nothing
here computes attention: the helpers only draw tensors that the chapters
compute in plain sight.

- ``show_matrix``: a labelled heatmap with the values written in the cells.
- ``draw_block``, ``draw_symbol``: grids of squares for shape diagrams.
- ``bar_slider``: a self-contained HTML/SVG/JavaScript slider over bar charts
  whose data are computed in Python at build time, so that it works on the
  static site without a kernel.
- ``explorer`` (with ``slider`` and ``toggle``): the same idea with several
  controls and heatmaps, bars or curves.
- ``glue``: a computed number for the text (myst-nb's glue; a no-op elsewhere).
"""
from __future__ import annotations

import html
import json
import math

import matplotlib.pyplot as plt
import numpy as np

__all__ = ["to_numpy", "show_matrix", "symmetric_limits",
           "draw_block", "draw_symbol", "bar_slider", "explorer", "slider", "toggle", "glue"]

plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 100, "axes.titlesize": 10,
                     "axes.labelsize": 9, "xtick.labelsize": 8, "ytick.labelsize": 8})


def to_numpy(m) -> np.ndarray:
    """A tensor (any device, with or without grad) or array-like as a NumPy array."""
    if hasattr(m, "detach"):
        m = m.detach().cpu().numpy()
    return np.asarray(m)


def symmetric_limits(m) -> tuple[float, float]:
    """(-b, b) with b the largest absolute value of m: a colour scale centred on 0."""
    bound = float(np.abs(to_numpy(m)).max()) or 1.0
    return -bound, bound


def show_matrix(ax, m, title="", xlabels=None, ylabels=None, cmap="Blues", fmt="{:.2f}",
                vmin=0.0, vmax=1.0, annotate=True, xlabel="key", ylabel="query",
                fontsize=8):
    """Heatmap of a 2-D tensor, optionally with its values written in the cells.

    Returns the image, for a colour bar.
    """
    m = to_numpy(m)
    im = ax.imshow(m, cmap=cmap, vmin=vmin, vmax=vmax)
    if xlabels is not None:
        ax.set_xticks(range(m.shape[1]), xlabels)
    if ylabels is not None:
        ax.set_yticks(range(m.shape[0]), ylabels)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if annotate:
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                value = float(m[i, j])
                if not np.isfinite(value):
                    continue
                r, g, b, _ = im.cmap(im.norm(value))
                dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5  # luminance of the cell
                ax.text(j, i, fmt.format(value), ha="center", va="center",
                        fontsize=fontsize, color="white" if dark else "black")
    return im


def draw_block(ax, x0, rows, cols, color, label, dims, height=5, y_center=None):
    """A rows x cols grid of unit squares, left edge at x0; returns its right edge."""
    y0 = (height - rows) / 2 if y_center is None else y_center - rows / 2
    for r in range(rows):
        for c in range(cols):
            ax.add_patch(plt.Rectangle((x0 + c, y0 + r), 1, 1, facecolor=color,
                                       edgecolor="white", linewidth=1.5))
    ax.text(x0 + cols / 2, y0 + rows + 0.4, label, ha="center", va="bottom", fontsize=11)
    ax.text(x0 + cols / 2, y0 - 0.4, dims, ha="center", va="top", fontsize=9, color="0.3")
    return x0 + cols


def draw_symbol(ax, x0, text, width=1.6, y=2.5, fontsize=13):
    """An operator symbol between two blocks; returns the x after it."""
    ax.text(x0 + width / 2, y, text, ha="center", va="center", fontsize=fontsize)
    return x0 + width


# ---------------------------------------------------------------------------
# Sliders for the static site
# ---------------------------------------------------------------------------

# What both widgets' scripts draw with (inside a function that has `svg` and `NS`): an SVG element
# added to the plot, and a number written short.
_SVG_HELPERS = r"""  function el(tag, attrs, text) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs) { e.setAttribute(k, attrs[k]); }
    if (text !== undefined) { e.textContent = text; }
    svg.appendChild(e);
    return e;
  }
  function fmt(v) {
    var a = Math.abs(v);
    if (a === 0) { return "0"; }
    if (a >= 1000 || a < 0.01) { return v.toExponential(0); }
    if (a >= 10) { return v.toFixed(0); }
    return v.toFixed(2).replace(/\.?0+$/, "");
  }"""

_SLIDER_JS = r"""
(function () {
  var root = document.getElementById(%(id)s);
  var data = %(data)s;
  var input = root.querySelector("input.course-slider");
  var svg = root.querySelector("svg.course-slider-plot");
  var readout = root.querySelector(".course-slider-value");
  var caption = root.querySelector(".course-slider-caption");
  var NS = "http://www.w3.org/2000/svg";
  var PW = data.panelWidth, PH = data.panelHeight;
  var M = {left: 46, right: 10, top: 24, bottom: 30};

%(svg_helpers)s
  function draw(step) {
    while (svg.firstChild) { svg.removeChild(svg.firstChild); }
    data.panels.forEach(function (p, k) {
      var x0 = k * PW + M.left, w = PW - M.left - M.right;
      var y0 = M.top, h = PH - M.top - M.bottom;
      var lim = p.ylim[step], lo = lim[0], hi = lim[1];
      var vals = p.values[step], n = vals.length;
      function Y(v) { return y0 + h * (hi - Math.max(lo, Math.min(hi, v))) / (hi - lo); }
      el("text", {x: x0 + w / 2, y: 14, "text-anchor": "middle", "font-size": 13,
                  fill: "currentColor"}, p.title);
      [lo, (lo + hi) / 2, hi].forEach(function (t) {
        el("line", {x1: x0, x2: x0 + w, y1: Y(t), y2: Y(t), stroke: "#bbbbbb",
                    "stroke-width": 0.5});
        el("text", {x: x0 - 5, y: Y(t) + 4, "text-anchor": "end", "font-size": 11,
                    fill: "currentColor"}, fmt(t));
      });
      var slot = w / n, base = Y(Math.max(lo, Math.min(hi, 0)));
      vals.forEach(function (v, i) {
        var y = Y(v);
        el("rect", {x: x0 + i * slot + slot * 0.12, width: slot * 0.76,
                    y: Math.min(y, base), height: Math.max(Math.abs(base - y), 0.5),
                    fill: p.color, "class": "course-slider-bar"});
      });
      el("line", {x1: x0, x2: x0 + w, y1: base, y2: base, stroke: "#555555", "stroke-width": 1});
      el("text", {x: x0 + w / 2, y: PH - 8, "text-anchor": "middle", "font-size": 11,
                  fill: "currentColor"}, p.xlabel);
    });
    svg.setAttribute("data-step", String(step));
    readout.textContent = data.labels[step];
    caption.textContent = data.captions[step];
  }
  input.addEventListener("input", function () { draw(parseInt(input.value, 10)); });
  input.addEventListener("change", function () { draw(parseInt(input.value, 10)); });
  draw(parseInt(input.value, 10));
})();
"""


def bar_slider(widget_id: str, label: str, labels, panels, captions=None, start: int = 0,
               panel_width: int = 330, panel_height: int = 200, description: str = ""):
    """A slider over precomputed bar charts, as self-contained HTML for the static site.

    ``labels[s]`` is the text shown for slider position ``s``; each panel is a dict
    with ``title``, ``values`` (one list of bar heights per position), ``ylim``
    (a pair, or one pair per position), optional ``color`` and ``xlabel``;
    ``captions[s]`` is a sentence shown under the plot. The slider is an
    ``<input type="range" class="course-slider">``, the plot an
    ``<svg class="course-slider-plot">`` redrawn on every ``input`` event; ids are
    ``{widget_id}``, ``{widget_id}-input`` and ``{widget_id}-plot``.

    Returns an ``IPython.display.HTML`` object; the page shows it as it is, with
    no kernel and no external library.
    """
    from IPython.display import HTML

    steps = len(labels)
    packed = []
    for p in panels:
        values = [[round(float(v), 5) for v in to_numpy(row).ravel()] for row in p["values"]]
        if len(values) != steps:
            raise ValueError("every panel needs one list of values per slider position")
        ylim = p["ylim"]
        if len(ylim) == 2 and np.isscalar(ylim[0]):
            ylim = [list(map(float, ylim))] * steps
        packed.append({"title": p["title"], "values": values,
                       "ylim": [[float(a), float(b)] for a, b in ylim],
                       "color": p.get("color", "#3b75af"), "xlabel": p.get("xlabel", "")})
    data = {"labels": [str(s) for s in labels],
            "captions": [str(c) for c in (captions or [""] * steps)],
            "panels": packed, "panelWidth": panel_width, "panelHeight": panel_height}
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    width = panel_width * len(panels)
    wid = html.escape(widget_id)
    aria = html.escape(description or label)
    markup = f"""
<div class="course-slider-widget" id="{wid}" style="max-width:{width + 20}px;margin:0.5em 0 1em 0;font-size:0.92em">
  <label for="{wid}-input" style="display:block;margin-bottom:0.2em">{html.escape(label)}:
    <strong><span class="course-slider-value" id="{wid}-value"></span></strong></label>
  <input type="range" class="course-slider" id="{wid}-input" min="0" max="{steps - 1}"
         step="1" value="{start}" style="width:100%;max-width:{width}px" aria-label="{aria}">
  <svg class="course-slider-plot" id="{wid}-plot" viewBox="0 0 {width} {panel_height}"
       width="100%" style="max-width:{width}px;display:block" role="img" aria-label="{aria}"></svg>
  <p class="course-slider-caption" id="{wid}-caption" style="margin:0.2em 0 0 0;min-height:2.6em"></p>
  <noscript>This interactive figure needs JavaScript.</noscript>
</div>
<script>{_SLIDER_JS % {"id": json.dumps(widget_id), "data": payload, "svg_helpers": _SVG_HELPERS}}</script>
"""
    return HTML(markup)


# ---------------------------------------------------------------------------
# Explorers: several controls, heatmaps, bars and curves, for the static site
# ---------------------------------------------------------------------------

_EXPLORER_JS = r"""
(function () {
  var root = document.getElementById(%(id)s);
  var data = %(data)s;
  var svg = root.querySelector("svg.course-slider-plot");
  var caption = root.querySelector(".course-slider-caption");
  var controls = Array.prototype.slice.call(root.querySelectorAll("[data-control]"));
  var NS = "http://www.w3.org/2000/svg";
  var PW = data.panelWidth, PH = data.panelHeight;
  var M = {left: 52, right: 10, top: 24, bottom: 34};

%(svg_helpers)s
  function mix(c0, c1, t) {  // two "#rrggbb" colours, t in [0, 1]
    var out = "#";
    for (var i = 1; i < 7; i += 2) {
      var a = parseInt(c0.substr(i, 2), 16), b = parseInt(c1.substr(i, 2), 16);
      out += ("0" + Math.round(a + (b - a) * t).toString(16)).slice(-2);
    }
    return out;
  }
  function colour(p, v) {
    if (v === null) { return "#d9d9d9"; }
    var t = Math.max(0, Math.min(1, (v - p.vmin) / (p.vmax - p.vmin)));
    if (p.cmap === "RdBu") { return t < 0.5 ? mix("#2166ac", "#f7f7f7", 2 * t) : mix("#f7f7f7", "#b2182b", 2 * t - 1); }
    return mix("#f7fbff", "#08306b", t);
  }
  function state() {
    return controls.map(function (c) { return c.type === "checkbox" ? (c.checked ? 1 : 0) : parseInt(c.value, 10); });
  }
  function axesY(x0, w, y0, h, lo, hi) {
    function Y(v) { return y0 + h * (hi - Math.max(lo, Math.min(hi, v))) / (hi - lo); }
    [lo, (lo + hi) / 2, hi].forEach(function (t) {
      el("line", {x1: x0, x2: x0 + w, y1: Y(t), y2: Y(t), stroke: "#bbbbbb", "stroke-width": 0.5});
      el("text", {x: x0 - 5, y: Y(t) + 4, "text-anchor": "end", "font-size": 11, fill: "currentColor"}, fmt(t));
    });
    return Y;
  }
  function bars(p, f, st, x0, w, y0, h) {
    var lo = p.ylim[0], hi = p.ylim[1], vals = f.values, n = vals.length, Y = axesY(x0, w, y0, h, lo, hi);
    var lit = p.highlight ? p.highlight.map[st[p.highlight.control]] : [];
    var ticks = f.xticks || p.xticks;  // a frame may name its own bars
    var slot = w / n, base = Y(Math.max(lo, Math.min(hi, 0)));
    vals.forEach(function (v, i) {
      var y = Y(v);
      el("rect", {x: x0 + i * slot + slot * 0.12, width: slot * 0.76, y: Math.min(y, base),
                  height: Math.max(Math.abs(base - y), 0.5),
                  fill: lit.indexOf(i) >= 0 ? p.highlight.color : p.color});
      if (ticks) {
        el("text", {x: x0 + (i + 0.5) * slot, y: y0 + h + 12, "text-anchor": "middle", "font-size": 10,
                    fill: "currentColor"}, ticks[i]);
      }
    });
    el("line", {x1: x0, x2: x0 + w, y1: base, y2: base, stroke: "#555555", "stroke-width": 1});
  }
  function lines(p, f, st, x0, w, y0, h) {
    var lo = p.ylim[0], hi = p.ylim[1], Y = axesY(x0, w, y0, h, lo, hi);
    f.series.forEach(function (s) {
      var n = s.y.length;
      function X(i) { return x0 + w * i / (n - 1); }
      el("polyline", {points: s.y.map(function (v, i) { return X(i) + "," + Y(v); }).join(" "),
                      fill: "none", stroke: s.color, "stroke-width": 1.6});
      if (p.marker !== undefined) {
        var i = st[p.marker];
        el("circle", {cx: X(i), cy: Y(s.y[i]), r: 4, fill: s.color});
        el("line", {x1: X(i), x2: X(i), y1: y0, y2: y0 + h, stroke: "#888888", "stroke-dasharray": "3,3"});
      }
    });
  }
  function matrix(p, f, st, x0, w, y0, h) {
    var rows = f.values.length, cols = f.values[0].length;
    var cell = Math.min(w / cols, h / rows), left = x0 + (w - cell * cols) / 2;
    var rl = f.rows || p.rows || [], cl = f.cols || p.cols || [];
    f.values.forEach(function (row, i) {
      row.forEach(function (v, j) {
        var fill = colour(p, v);
        el("rect", {x: left + j * cell, y: y0 + i * cell, width: cell, height: cell, fill: fill,
                    stroke: "#ffffff", "stroke-width": 1});
        var text = f.text ? f.text[i][j] : (v === null ? "" : fmt(v));
        if (text !== "" && cell >= 16) {
          var dark = v !== null && Math.abs((v - p.vmin) / (p.vmax - p.vmin) - (p.cmap === "RdBu" ? 0.5 : 0)) > (p.cmap === "RdBu" ? 0.3 : 0.55);
          el("text", {x: left + (j + 0.5) * cell, y: y0 + (i + 0.5) * cell + 4, "text-anchor": "middle",
                      "font-size": Math.min(11, cell / 3), fill: dark ? "#ffffff" : "#000000"}, text);
        }
      });
    });
    rl.forEach(function (t, i) {
      el("text", {x: left - 4, y: y0 + (i + 0.5) * cell + 4, "text-anchor": "end", "font-size": 10,
                  fill: "currentColor"}, t);
    });
    cl.forEach(function (t, j) {
      el("text", {x: left + (j + 0.5) * cell, y: y0 + rows * cell + 12, "text-anchor": "middle", "font-size": 10,
                  fill: "currentColor"}, t);
    });
  }
  var draw_panel = {bars: bars, lines: lines, matrix: matrix};
  function draw() {
    var st = state();
    while (svg.firstChild) { svg.removeChild(svg.firstChild); }
    data.panels.forEach(function (p, k) {
      var x0 = k * PW + M.left, w = PW - M.left - M.right, y0 = M.top, h = PH - M.top - M.bottom;
      var f = p.frames[p.deps.map(function (d) { return st[d]; }).join(",")];
      el("text", {x: x0 + w / 2, y: 14, "text-anchor": "middle", "font-size": 13, fill: "currentColor"},
         f.title || p.title);
      draw_panel[p.kind](p, f, st, x0, w, y0, h);
      if (p.xlabel) {
        el("text", {x: x0 + w / 2, y: PH - 4, "text-anchor": "middle", "font-size": 11, fill: "currentColor"},
           p.xlabel);
      }
    });
    controls.forEach(function (c, i) {
      var out = root.querySelector("#" + c.id + "-value");
      if (out) { out.textContent = data.controls[i].labels[st[i]]; }
    });
    var key = st.join(",");
    svg.setAttribute("data-state", key);
    caption.textContent = data.captions[key] || "";
  }
  controls.forEach(function (c) {
    c.addEventListener("input", draw);
    c.addEventListener("change", draw);
  });
  draw();
})();
"""


def slider(label: str, labels, start: int = 0) -> dict:
    """A control for ``explorer``: a range input over ``labels`` (the texts shown for each position)."""
    return {"kind": "slider", "label": label, "labels": [str(s) for s in labels], "start": int(start)}


def toggle(label: str, start: bool = False) -> dict:
    """A control for ``explorer``: a checkbox, worth 0 (off) or 1 (on)."""
    return {"kind": "toggle", "label": label, "labels": ["off", "on"], "start": int(bool(start))}


def _values(m):
    """Rounded floats for JSON; NaN and infinities become null (drawn as a grey cell)."""
    a = to_numpy(m).astype(float)
    out = np.round(a, 4).tolist()

    def clean(x):
        if isinstance(x, list):
            return [clean(v) for v in x]
        return x if math.isfinite(x) else None
    return clean(out)


def explorer(widget_id: str, controls: list[dict], panels: list[dict], caption=None,
             panel_width: int = 300, panel_height: int = 240, description: str = ""):
    """Precomputed panels behind sliders and checkboxes, as self-contained HTML for the static site.

    ``controls`` are made by ``slider`` and ``toggle``; a control's state is an int
    (the slider position, or 0/1). Each panel is a dict with ``kind`` (``"bars"``,
    ``"lines"`` or ``"matrix"``), ``title``, ``deps`` (the indices of the controls it
    depends on) and ``frame``, a function of those controls' states that returns the
    panel's data: ``{"values": [...]}`` for bars (a 1-D list) and matrices (2-D; an
    optional ``"text"`` 2-D list of cell labels), ``{"series": [{"y": [...], "color":
    ...}]}`` for lines; any frame may set its own ``"title"`` (and a bars frame its own
    ``"xticks"``). Panel options: ``ylim``,
    ``color``, ``xticks``, ``xlabel`` (bars); ``ylim``, ``marker`` (index of the slider
    whose value marks a point on every curve) (lines); ``vmin``, ``vmax``, ``cmap``
    (``"Blues"`` or ``"RdBu"``), ``rows``, ``cols`` (matrices); ``highlight`` =
    ``{"control": i, "map": [[bar indices] per state], "color": ...}`` (bars).
    ``caption(*states)`` is the sentence under the figure.

    Every frame is computed here, in Python, when the page is built; the page only
    chooses which to draw, so it needs no kernel. Each slider is an
    ``<input type="range" class="course-slider">`` and each checkbox an
    ``<input type="checkbox" class="course-toggle">``, in the same
    ``<div class="course-explorer">`` as the ``<svg class="course-slider-plot">``
    they redraw. Returns an ``IPython.display.HTML`` object.
    """
    import itertools

    from IPython.display import HTML

    sizes = [len(c["labels"]) for c in controls]
    packed = []
    for p in panels:
        deps = list(p.get("deps", []))
        frames = {}
        for combo in itertools.product(*(range(sizes[d]) for d in deps)):
            frame = dict(p["frame"](*combo))
            if "values" in frame:
                frame["values"] = _values(frame["values"])
            if "series" in frame:
                frame["series"] = [{"y": _values(s["y"]), "color": s.get("color", "#3b75af")}
                                   for s in frame["series"]]
            frames[",".join(map(str, combo))] = frame
        spec = {k: v for k, v in p.items() if k not in {"frame"}}
        spec.update(deps=deps, frames=frames, color=p.get("color", "#3b75af"),
                    vmin=float(p.get("vmin", 0.0)), vmax=float(p.get("vmax", 1.0)), cmap=p.get("cmap", "Blues"))
        if "ylim" in p:
            spec["ylim"] = [float(v) for v in p["ylim"]]
        packed.append(spec)
    captions = {}
    if caption is not None:
        for combo in itertools.product(*(range(n) for n in sizes)):
            captions[",".join(map(str, combo))] = str(caption(*combo))
    data = {"controls": [{"labels": c["labels"]} for c in controls], "panels": packed,
            "captions": captions, "panelWidth": panel_width, "panelHeight": panel_height}
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    width = panel_width * len(panels)
    wid = html.escape(widget_id)
    aria = html.escape(description)
    inputs = []
    for i, c in enumerate(controls):
        cid = f"{wid}-control{i}"
        if c["kind"] == "slider":
            inputs.append(
                f'<label for="{cid}" style="display:block;margin:0.2em 0 0 0">{html.escape(c["label"])}: '
                f'<strong><span class="course-slider-value" id="{cid}-value"></span></strong></label>'
                f'<input type="range" class="course-slider" data-control="{i}" id="{cid}" min="0" '
                f'max="{len(c["labels"]) - 1}" step="1" value="{c["start"]}" '
                f'style="width:100%;max-width:{min(width, 420)}px" aria-label="{html.escape(c["label"])}">')
        else:
            checked = " checked" if c["start"] else ""
            inputs.append(
                f'<label for="{cid}" style="display:inline-block;margin:0.3em 1.2em 0 0">'
                f'<input type="checkbox" class="course-toggle" data-control="{i}" id="{cid}"{checked}> '
                f'{html.escape(c["label"])}</label>')
    markup = f"""
<div class="course-explorer" id="{wid}" style="max-width:{width + 20}px;margin:0.5em 0 1em 0;font-size:0.92em">
  {"".join(inputs)}
  <svg class="course-slider-plot" id="{wid}-plot" viewBox="0 0 {width} {panel_height}"
       width="100%" style="max-width:{width}px;display:block;margin-top:0.4em" role="img" aria-label="{aria}"></svg>
  <p class="course-slider-caption" id="{wid}-caption" style="margin:0.2em 0 0 0;min-height:2.6em"></p>
  <noscript>This interactive figure needs JavaScript.</noscript>
</div>
<script>{_EXPLORER_JS % {"id": json.dumps(widget_id), "data": payload, "svg_helpers": _SVG_HELPERS}}</script>
"""
    return HTML(markup)


def glue(name: str, value, display: bool = False):
    """Hand a computed value to the page's text (myst-nb's ``{glue:text}`` role), so prose cannot drift.

    Outside the book build (a notebook on Colab, without myst-nb) there is no page
    to paste into: the value is printed, ``name: value``, and returned.
    """
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        print(f"{name}: {value:.4g}" if isinstance(value, float) else f"{name}: {value}")
        return value
    myst_glue(name, value, display=display)
    return value
