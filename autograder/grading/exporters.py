"""nbconvert exporters that validate a notebook only where it can have become invalid.

nbconvert validates the whole notebook against the nbformat schema after every
preprocessor, a dozen times per notebook. Here the notebook is validated where
something from outside can make it invalid: when it is read, and after the kernel's
outputs come in; the grader's own steps only move cells and outputs that passed.
"""
from __future__ import annotations

from nbconvert.exporters import NotebookExporter
from nbconvert.preprocessors import ExecutePreprocessor


class ValidatedAfterKernel:
    """Validate after the step that runs the kernel; the other steps are the grader's own."""

    def _validate_preprocessor(self, nbc, preprocessor):
        if isinstance(preprocessor, ExecutePreprocessor):
            super()._validate_preprocessor(nbc, preprocessor)


class AutogradeExporter(ValidatedAfterKernel, NotebookExporter):
    """nbgrader autograde's exporter (the notebook as .ipynb), validated after execution."""
