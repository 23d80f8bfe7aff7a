"""Small plotting helpers shared by the chapters of "Attention from scratch".

The chapters run with the ``book/`` folder as their working directory and
import what they need with ``from plots import ...`` in a hidden cell. Nothing
here computes attention: the helpers only draw tensors that the chapters
compute in plain sight.

- ``show_matrix``: a labelled heatmap with the values written in the cells.
- ``head_grid``: one small heatmap per attention head.
- ``draw_block``, ``draw_symbol``: grids of squares for shape diagrams.
- ``bar_slider``: a self-contained HTML/SVG/JavaScript slider over bar charts
  whose data are computed in Python at build time, so that it works on the
  static site without a kernel.
"""
from __future__ import annotations

import html
import json
import math

import matplotlib.pyplot as plt
import numpy as np

__all__ = ["to_numpy", "show_matrix", "symmetric_limits", "head_grid",
           "draw_block", "draw_symbol", "bar_slider"]

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


def head_grid(weights, labels=None, ncols=4, title="head {}", cmap="Blues",
              vmin=0.0, vmax=1.0, size=1.9, colorbar_label="weight"):
    """One small heatmap per head: ``weights`` is (H, L, S). Returns the figure."""
    weights = to_numpy(weights)
    heads = weights.shape[0]
    nrows = math.ceil(heads / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols + 0.8, size * nrows + 0.2),
                             layout="constrained", squeeze=False)
    for h, ax in enumerate(axes.flat):
        if h >= heads:
            ax.axis("off")
            continue
        im = ax.imshow(weights[h], cmap=cmap, vmin=vmin, vmax=vmax)
        ax.set_title(title.format(h), fontsize=9)
        if labels is not None:
            ax.set_xticks(range(len(labels)), labels, fontsize=7, rotation=90)
            ax.set_yticks(range(len(labels)), labels, fontsize=7)
        else:
            ax.set_xticks([])
            ax.set_yticks([])
    fig.colorbar(im, ax=axes, shrink=0.8, label=colorbar_label)
    return fig


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

  function el(tag, attrs, text) {
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
  }
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
<script>{_SLIDER_JS % {"id": json.dumps(widget_id), "data": payload}}</script>
"""
    return HTML(markup)
