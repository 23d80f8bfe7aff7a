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
