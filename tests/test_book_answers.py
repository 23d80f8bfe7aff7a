"""The answer cells of chapters 08 and 10 (code cells tagged `answers:<assignment>`, which the
self-study book shows and the students' edition withholds until the deadline) define the models
that trained the book's stored results: the same weights from the same seed, the same outputs,
the same decodings, as coursebuild's code (coursebuild/, which trains them before the site is
built). Those of chapters 07 and 09 compute what the page shows after them, stored by running the
page itself (coursebuild/answer_cells.py). Their definitions are run here in-process; the pages
run them in the site's build."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder.instructor.functional import CODE_CELL, cell_options, cell_parts, definitions
from classroom import REPO
from coursebuild import chargpt, reversal  # puts book/ on sys.path, as the pages have it

import generation  # noqa: E402 - book/generation.py
import learning  # noqa: E402 - book/learning.py
import stored  # noqa: E402 - book/stored.py


def answer_definitions(page: str, assignment: str, **names) -> dict:
    """The imports, functions and classes of the page's cells tagged answers:<assignment>, run with
    ``names`` (what the page's other cells define before them)."""
    text = (REPO / "book" / page).read_text(encoding="utf-8")
    cells = [cell_parts(cell["body"])[1] for cell in CODE_CELL.finditer(text)
             if f"answers:{assignment}" in (cell_options(cell["body"]).get("tags") or [])]
    assert cells, f"{page} has no cell tagged answers:{assignment}"
    namespace = dict(torch=torch, nn=nn, F=F, math=math, **names)
    exec(compile(definitions("\n\n".join(cells)), page, "exec"), namespace)  # noqa: S102 - the book's own code
    return namespace


@pytest.fixture(scope="module")
def chapter_10():
    return answer_definitions("10-positions-and-generation.md", "10-positions-and-generation",
                              SETTINGS=generation.SETTINGS, learning=learning)


def test_chapter_10s_functions_compute_what_the_stored_results_were_computed_with(chapter_10):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 5, 8, generator=gen, dtype=torch.float64)
    positions = torch.tensor([3, 1, 4, 1, 5])
    assert torch.equal(chapter_10["apply_rope"](x, positions), chargpt.apply_rope(x, positions))
    assert torch.equal(chapter_10["alibi_bias"](8, 5, 12), chargpt.alibi_bias(8, 5, 12))
    logits = torch.randn(3, 40, generator=gen)
    for options in [{}, dict(temperature=0.5), dict(top_k=5), dict(top_p=0.9), dict(temperature=2.0, top_k=10, top_p=0.7)]:
        assert torch.equal(chapter_10["next_token_distribution"](logits, **options),
                           chargpt.next_token_distribution(logits, **options)), options
    table = torch.log_softmax(torch.randn(12, 12, generator=gen, dtype=torch.float64), -1)  # next id by the last id

    def step_fn(ids):
        return table[ids[:, -1]]

    for beam in (1, 3):
        assert chapter_10["beam_search"](step_fn, [0, 4], beam, 6, 11) == chargpt.beam_search(step_fn, [0, 4], beam, 6, 11)


@pytest.mark.parametrize("position", generation.POSITIONS)
def test_chapter_10s_model_has_the_built_models_weights_and_outputs(chapter_10, position):
    learning.seed_everything(0)
    page_model = chapter_10["CharGPT"](30, position)
    learning.seed_everything(0)
    built = chargpt.CharGPT(30, position)
    page_weights, built_weights = page_model.state_dict(), built.state_dict()
    assert list(page_weights) == list(built_weights)
    assert all(torch.equal(page_weights[name], built_weights[name]) for name in built_weights)
    ids = torch.randint(30, (2, 40), generator=torch.Generator().manual_seed(1))
    assert torch.equal(page_model(ids), built(ids))
    prompt = ids[0, :5]
    assert torch.equal(chapter_10["generate"](page_model, prompt, 20, torch.Generator().manual_seed(2), top_p=0.9),
                       chargpt.generate(built, prompt, 20, torch.Generator().manual_seed(2), top_p=0.9))


def test_chapter_08s_model_loads_the_trained_weights_and_decodes_as_they_were_stored():
    chapter_08 = answer_definitions("08-decoder.md", "08-decoder", learning=learning, START=learning.START,
                                    PAD=learning.PAD, VOCAB=learning.VOCAB)
    untrained, trained, run = learning.load_reversal()
    page_model = chapter_08["Seq2Seq"](**learning.REVERSAL["model"]).eval()
    page_model.load_state_dict(trained.state_dict())  # strict: the same parameters and buffers
    src, tgt = learning.held_out_sequences()
    tgt_in = chapter_08["shift_right"](tgt, learning.START)
    assert torch.equal(tgt_in, reversal.shift_right(tgt, learning.START)) and torch.equal(tgt_in, run["test_tgt_in"])
    with torch.no_grad():
        assert torch.equal(page_model(src[:50], tgt_in[:50]), trained(src[:50], tgt_in[:50]))
        assert torch.equal(chapter_08["reversal_loss"](page_model, (src[:50], tgt[:50])),
                           reversal.reversal_loss(trained, (src[:50], tgt[:50])))
    decoded = chapter_08["greedy_decode"](page_model, src[:100], learning.START, tgt.shape[1])
    assert torch.equal(decoded, trained.generate(src[:100], learning.START, tgt.shape[1]))
    assert torch.equal(decoded, run["decoded_after"][:100])


# Chapters 07 and 09 (issue 58): their answer cells compute what the exercises grade, so the
# students' edition withholds them; what the page shows after them comes from book/data/, which
# coursebuild writes by running the page itself (coursebuild/answer_cells.py).


def test_chapter_09s_answer_cells_compute_the_online_softmax_and_tiled_attention_the_stored_results_show():
    chapter_09 = answer_definitions("09-attention-at-scale.md", "09-attention-at-scale")
    built = stored.load("attention-at-scale.pt")
    for end, (m, l) in built["running"].items():
        row = built["example_row"][:end]
        assert [torch.equal(a, b) for a, b in zip(chapter_09["streaming_max_and_sum"](row, 4), (m, l))] == [True, True]
        assert torch.allclose(torch.exp(row - m) / l, torch.softmax(row, -1))
    gen = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(37, 8, generator=gen, dtype=torch.float64) for _ in range(3))
    assert torch.allclose(chapter_09["tiled_attention"](q, k, v, 5), F.scaled_dot_product_attention(q, k, v))
    assert built["softmax_error"] < 1e-12 and built["tiled_error"] < 1e-12 and built["decoded_same"] == 1000
    tiled, naive = built["tiled"], built["naive_beside_tiled"]
    assert [tiled[L][0] for L in tiled] == [L * 64 * 4 for L in tiled]  # the output: linear in L
    assert [naive[L][0] for L in naive] == [L * L * 4 for L in naive]  # the score matrix


def test_the_stored_results_of_the_answer_cells_are_those_of_the_pages_as_they_are():
    """Each file was computed from the page as it is now (its hash, as `coursebuild.models --check`
    reads it): a page edited without `python -m coursebuild.models` would show stale numbers."""
    from coursebuild import answer_cells, models

    files = {page.file for page in answer_cells.PAGES}
    assert files == {"additive-attention.pt", "attention-at-scale.pt"}
    stale = [r.file for r in models.RESULTS if r.file in files and r.stored_key() != r.key()]
    assert stale == [], f"run `python -m coursebuild.models`: {stale} out of date"


def test_a_pages_stored_results_are_what_its_answer_cells_compute_as_the_page_runs(tmp_path):
    """The later cells read them from the run, as the answer cells left them (a later cell that
    reuses a name changes nothing stored); the book's own `stored` comes back after the run."""
    from coursebuild.answer_cells import run_page

    page = tmp_path / "page.md"
    page.write_text("# A page\n\n```{code-cell} ipython3\n:tags: [answers:07-additive-attention]\n\n"
                    "value = 6 * 7\n```\n\nProse.\n\n```{code-cell} ipython3\nimport stored\n\n"
                    "built = stored.load('page.pt')\nshown = built['value']\n%time shown\nvalue = 0\n```\n")
    assert run_page(page, "page.pt", ("value",)) == {"value": 42}
    assert stored.load.__module__ == "stored" and stored.load is not None  # the book's own again
    with pytest.raises(KeyError):
        run_page(page, "page.pt", ())  # a value the file does not hold
