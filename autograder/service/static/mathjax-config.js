// MathJax 3 for a feedback page the service shows: the course's math between $...$ or $$...$$,
// as Jupyter and the book write it, and MathJax's Safe extension (no javascript: in \href and the
// like), loaded from the service itself (autograder/service/app.py, FEEDBACK_MATH).
window.MathJax = {
  tex: {inlineMath: [["$", "$"], ["\\(", "\\)"]], displayMath: [["$$", "$$"], ["\\[", "\\]"]], processEscapes: true},
  loader: {load: ["ui/safe"]},
  options: {enableMenu: false},
};
