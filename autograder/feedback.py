"""nbgrader's feedback pages, rendered with templates compiled once per process.

nbgrader builds a new HTML exporter for every student, and each one parses and
compiles the same Jinja templates again: a tenth of a second per notebook. Jinja's
bytecode cache keeps the compiled templates (checked against the template source),
so every page after the first skips that work; the pages are the same.
"""
from __future__ import annotations

import jinja2
from nbconvert.exporters import HTMLExporter


class MemoryBytecodeCache(jinja2.BytecodeCache):
    def __init__(self):
        self.compiled: dict[str, bytes] = {}

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        if bucket.key in self.compiled:
            bucket.bytecode_from_string(self.compiled[bucket.key])  # ignored if the source changed

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        self.compiled[bucket.key] = bucket.bytecode_to_string()


class FeedbackExporter(HTMLExporter):
    """nbgrader's feedback exporter (HTML with its feedback template), sharing compiled templates."""

    compiled_templates = MemoryBytecodeCache()

    def _create_environment(self) -> jinja2.Environment:
        environment = super()._create_environment()
        environment.bytecode_cache = self.compiled_templates
        return environment
