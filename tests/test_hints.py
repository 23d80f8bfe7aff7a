"""A hint names the student's own mistake, never another one (issue 27).

Every buggy corpus student of every assignment, as the real CLI graded it (the class
tests/test_grading.py grades too, graded once per session: tests/graded_classes.py): its
failing messages must hold its own ``# hint:``, and no hint line may hold another mistake's
(the rule of classroom/hints.py's ``foreign_hints``, whose table shows it per
assignment). The rule itself is tested on made-up messages: it must find another mistake's
hint, and let pass the student's own, one of the same mistake, and a hedged hint the student's
file allows."""
from __future__ import annotations


import pytest

from classroom import CorpusEntry
from classroom.hints import foreign_hints, mistake_hints

pytestmark = pytest.mark.slow  # runs kernels, the CLI, a server or a browser


def test_every_hint_is_the_students_own(graded):  # each assignment's class (graded_classes.py)
    known = mistake_hints(graded.assignment)
    buggy = [e for e in graded.corpus if e.expect == "partial"]
    assert buggy, f"no buggy student in tests/corpus/{graded.assignment}/"
    problems = []
    for entry in buggy:
        failing = graded.failing_messages(f"corpus-{entry.name}")
        if not any(entry.hint.lower() in text.lower() for text in failing):
            problems.append(f"{entry.name}: no {entry.hint!r} in\n" + "\n\n".join(failing))
        problems += foreign_hints(entry, failing, graded.corpus, known)
    assert not problems, "\n\n".join(problems)


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


def test_the_students_own_code_quoted_in_a_hint_names_no_mistake():
    """A finding quotes the student's own line; a word of that code (a comment in it) is not
    another mistake's hint, while the same words in the grader's own text are."""
    quoted = "hint: line 3 (`x = encoder(src)  # as if the encoder never learned`) is the first to differ."
    assert foreign_hints(PRE_NORM, [_message(quoted)], CORPUS) == []
    assert foreign_hints(PRE_NORM, [_message(quoted.replace("`", ""))], CORPUS) != []


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


@pytest.mark.parametrize("graded", ["09-attention-at-scale"], indirect=True)
def test_pytorchs_own_message_reaches_the_notebook_and_the_feedback_page(graded):
    """KVCache's torch.cat along the features raises inside PyTorch; its test cells run after the
    first hidden test (sealed), and still quote PyTorch's message, with the case's own sizes."""
    student = "corpus-cache_cat_on_features"
    said = ("raised RuntimeError: Sizes of tensors must match except in dimension 3. Expected size 3 but got size 1 "
            "for tensor number 1 in the list.")
    assert any(said in text for text in graded.failing_messages(student)), graded.failing_messages(student)
    assert said in graded.feedback_text(student)
