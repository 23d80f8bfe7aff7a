"""A hint names the student's own mistake, never another one (issue 27).

Every buggy corpus student of 07-additive-attention is graded in-process: its failing messages
must hold its own ``# hint:``, and no hint line may hold another mistake's (the rule of
benchmarks/hint_coverage.py's ``foreign_hints``, whose table shows it per assignment). The rule
itself is tested on made-up messages: it must find another mistake's hint, and let pass the
student's own, one of the same mistake, and a hedged hint the student's file allows."""
from __future__ import annotations

import sys

import pytest

from classroom import REPO, CorpusEntry, load_corpus
from notebook_harness import SourceNotebook

sys.path.insert(0, str(REPO / "benchmarks"))
from hint_coverage import foreign_hints, mistake_hints  # noqa: E402

ASSIGNMENTS = ["07-additive-attention"]  # 08-decoder: once its diagnoses land (issue 27)
BUGGY = [(a, e) for a in ASSIGNMENTS for e in load_corpus(a) if e.expect == "partial" and not e.added]
NOTEBOOKS: dict[str, SourceNotebook] = {}
KNOWN: dict[str, set[str]] = {}  # assignment -> the hints of its known mistakes


@pytest.mark.parametrize("assignment, entry", BUGGY, ids=[f"{a}/{e.name}" for a, e in BUGGY])
def test_every_hint_is_the_students_own(assignment, entry):
    nb = NOTEBOOKS.setdefault(assignment, SourceNotebook(assignment))
    known = KNOWN.setdefault(assignment, mistake_hints(assignment))
    failing = [message for points, message in nb.grade_all(entry.cells).values() if not message.startswith("✓")]
    assert any(entry.hint.lower() in text.lower() for text in failing), "\n\n".join(failing)
    assert foreign_hints(entry, failing, load_corpus(assignment, cli=True), known) == [], "\n\n".join(failing)


# --------------------------------------------------------------------------
# the rule itself, on made-up students


def _entry(name: str, hint: str) -> CorpusEntry:
    return CorpusEntry("08-decoder", f"made_up_{name}", "partial", hint)


PRE_NORM, DETACHED = _entry("pre_norm", "pre-norm"), _entry("memory_detached", "as if the encoder never learned")
SAME = _entry("pre_norm_again", "Your layer is pre-norm")  # the same mistake, in other words
CORPUS = [PRE_NORM, DETACHED, SAME]
OWN = "hint: Your layer is pre-norm (x + Sublayer(LayerNorm(x))); this exercise is post-norm."
OTHERS = "hint: Your loss falls, but as if the encoder never learned: gradients do not reach its weights."


def _message(*hints: str) -> str:
    return "✗ DecoderLayer: 1 of 1 cases fail (0.5 / 2 points)\n\ncase 1: tgt (2, 5, 8)\n" + "\n".join(
        f"    {h}" for h in hints)


def test_another_mistakes_hint_is_found():
    assert foreign_hints(PRE_NORM, [_message(OWN)], CORPUS) == []
    found = foreign_hints(PRE_NORM, [_message(OWN), _message(OTHERS)], CORPUS)
    assert len(found) == 1 and "'as if the encoder never learned'" in found[0], found
    # the whole hint of a known mistake of the answers, which no corpus file's hint names
    known = "hint: Apply the layers in order, self.layers[0] first."
    assert foreign_hints(PRE_NORM, [_message(OWN, known)], CORPUS) == []
    assert len(foreign_hints(PRE_NORM, [_message(OWN, known)], CORPUS, {known.removeprefix("hint: ")})) == 1


def test_the_same_mistake_and_allowed_texts_are_not_another(tmp_path, monkeypatch):
    # a student of the same mistake, whose hint holds this one's, names no other mistake
    assert foreign_hints(PRE_NORM, [_message("hint: Your layer is pre-norm; so is your decoder.")], CORPUS) == []
    # a hint worded as one possibility among others, which the file allows ("# also:")
    import classroom

    hedged = "hint: Your first loss differs: dropout, or as if the encoder never learned, or another mistake."
    assert foreign_hints(PRE_NORM, [_message(OWN, hedged)], CORPUS) != []
    (tmp_path / "08-decoder").mkdir()
    (tmp_path / "08-decoder" / f"{PRE_NORM.name}.py").write_text(
        "# expect: partial\n# hint: pre-norm\n# also: Your first loss differs\n# %% cell: decoder_layer\n")
    monkeypatch.setattr(classroom, "CORPUS", tmp_path)
    assert foreign_hints(PRE_NORM, [_message(OWN, hedged)], CORPUS) == []
