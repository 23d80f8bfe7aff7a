// Loaded on pages with ipywidgets just before RequireJS and the Jupyter widget manager
// (_static/jupyter-widgets/embed-amd.js), which is several AMD modules in one file.
// Each module finds its font files through its RequireJS URL: a global `require`
// object set before require.js loads is its configuration, and these paths make
// every module's URL lie in _static/jupyter-widgets/, where the fonts are.
// (Without them the fonts are looked for under <page folder>/@jupyter-widgets/.)
// The widgets typeset their labels with MathJax 2's MathJax.Hub.Queue; the book uses
// MathJax 3, so a Hub that forwards to MathJax 3 is added before they render (on load).
(function () {
  var here = new URL("jupyter-widgets/", document.currentScript.src).href;
  var paths = {"@jupyter-widgets/html-manager/dist/libembed-amd": here + "libembed-amd"};
  ["base", "base7", "controls", "controls7", "html-manager"].forEach(function (name) {
    paths["@jupyter-widgets/" + name] = here + name;
  });
  window.__jupyter_widgets_assets_path__ = here;
  window.require = {paths: paths};
  window.addEventListener("load", function () {
    var mathjax = window.MathJax;
    if (mathjax && !mathjax.Hub && mathjax.typesetPromise) {
      mathjax.Hub = {Queue: function () {
        var elements = [];
        Array.prototype.forEach.call(arguments, function (job) {
          if (Array.isArray(job) && job[0] === "Typeset" && job[2]) elements.push(job[2]);
        });
        return mathjax.typesetPromise(elements);
      }};
    }
  });
})();
