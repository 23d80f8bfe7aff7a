"""book/learning.py, the training helpers of the chapters that train a model (07 onward):
training is reproducible, the accuracy counts what it should, and the before/after figure
draws both panels on one colour scale."""
from __future__ import annotations

import sys

import matplotlib
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from classroom import REPO

matplotlib.use("Agg")
sys.path.insert(0, str(REPO / "book"))
import learning  # noqa: E402


@pytest.fixture(autouse=True)
def _restore_torch_settings():
    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    yield
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(deterministic)


def _batch(gen: torch.Generator):
    x = torch.randn(32, 4, generator=gen)
    return x, (x[:, 0] > x[:, 1]).long()  # a linearly separable task


def _loss(model, batch):
    x, y = batch
    return F.cross_entropy(model(x), y)


def _trained(seed: int):
    learning.seed_everything(seed)
    model = nn.Linear(4, 2)
    return model, learning.train(model, _batch, _loss, steps=60, lr=0.05, seed=1)


def test_training_is_reproducible_and_learns():
    model_a, run_a = _trained(0)
    model_b, run_b = _trained(0)
    assert run_a["losses"] == run_b["losses"] and len(run_a["losses"]) == 60
    assert torch.equal(model_a.weight, model_b.weight)
    assert not model_a.training  # left in eval mode
    assert run_a["losses"][-1] < 0.5 * run_a["losses"][0]
    x, y = _batch(torch.Generator().manual_seed(5))
    with torch.no_grad():
        assert learning.accuracy(model_a(x), y) > 0.9
    _, run_c = _trained(1)  # another initial model, another curve
    assert run_c["losses"] != run_a["losses"]


def test_accuracy_ignores_padding_and_counts_whole_sequences():
    targets = torch.tensor([[1, 2, 0], [2, 2, 2]])  # 0 = padding
    predicted = torch.tensor([[1, 2, 1], [2, 1, 2]])
    logits = F.one_hot(predicted, 3).float()  # (B, L, C)
    assert learning.accuracy(logits, targets) == pytest.approx(4 / 6)
    assert learning.accuracy(logits, targets, ignore_index=0) == pytest.approx(4 / 5)
    assert learning.accuracy(logits, targets, ignore_index=0, per_sequence=True) == pytest.approx(1 / 2)


@pytest.mark.parametrize("vertical", [False, True])
def test_attention_before_after_shares_one_colour_scale(vertical):
    before, after = torch.full((3, 5), 0.2), torch.eye(3, 5)
    highlight = torch.eye(3, 5, dtype=torch.bool)
    fig = learning.attention_before_after(before, after, cell_labels=[list("abcde")] * 3, highlight=highlight,
                                          vertical=vertical)
    images = [ax.images[0] for ax in fig.axes if ax.images]
    assert len(images) == 2 and {im.get_clim() for im in images} == {(0.0, 1.0)}
    assert sum(len(ax.patches) for ax in fig.axes) == 2 * 3  # one frame per highlighted cell and panel


# -- the reversal model of chapter 08, trained by coursebuild, loaded by the book --------------
import stored  # noqa: E402  (book/, on the path above)
from coursebuild import models, reversal  # noqa: E402


def test_the_reversal_model_trained_at_build_time_is_the_one_the_book_loads(monkeypatch, tmp_path):
    """coursebuild.reversal trains the model (6 steps here instead of 500); learning.load_reversal
    reads back the same weights, the same initial weights and the run, from book/data/ (here a
    temporary folder)."""
    monkeypatch.setitem(learning.REVERSAL, "steps", 6)
    monkeypatch.setitem(learning.REVERSAL, "warmup", 2)
    steps = []
    payload = reversal.build(steps.append)
    assert len(steps) == 6 and len(payload["run"]["losses"]) == 6
    torch.save(payload, tmp_path / "reversal.pt")
    monkeypatch.setattr(stored, "DATA", tmp_path)
    untrained, trained, run = learning.load_reversal()
    src, tgt = learning.held_out_sequences()
    assert torch.equal(run["test_tgt_in"][:, 1:], tgt[:, :-1]) and (run["test_tgt_in"][:, 0] == learning.START).all()
    assert torch.equal(trained.generate(src[:50], learning.START, 9), run["decoded_after"][:50])
    probe = (src[:16], run["test_tgt_in"][:16])
    maps, fresh = learning.head_weights(trained, *probe), learning.head_weights(untrained, *probe)
    assert len(maps) == 6  # 2 encoder self-, 2 decoder self-, 2 cross-attentions
    name = "transformer.decoder.layers.1.multihead_attn"
    assert maps[name].shape[1] == 4 and not torch.equal(maps[name], fresh[name])  # 6 steps moved the weights
    again = reversal.build(lambda n: None)  # seeded: the same weights again
    assert all(torch.equal(again["trained"][k], v) for k, v in payload["trained"].items())


def test_a_stored_result_is_built_again_only_when_its_code_or_data_change(monkeypatch, tmp_path, capsys):
    (tmp_path / "code.py").write_text("one = 1\n")
    builds = []
    result = models.Result("tiny.pt", "a tiny result", ["code.py"], 3,
                           lambda progress: builds.append(1) or {"value": torch.tensor(len(builds))})
    monkeypatch.setattr(models, "REPO", tmp_path)
    monkeypatch.setattr(models, "DATA", tmp_path / "data")
    monkeypatch.setattr(models, "RESULTS", [result])
    assert models.main(["--check"]) == 1 and not builds  # missing: --check says so and builds nothing
    assert models.main([]) == 0 and len(builds) == 1
    assert models.main([]) == 0 and len(builds) == 1  # up to date: nothing trained
    assert models.main(["--check"]) == 0
    (tmp_path / "code.py").write_text("one = 2\n")  # the code changed: built again
    assert models.main(["--check"]) == 1
    assert models.main([]) == 0 and len(builds) == 2
    assert torch.load(tmp_path / "data" / "tiny.pt", weights_only=True)["value"] == 2
    assert "up to date" in capsys.readouterr().out
