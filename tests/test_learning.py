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


# -- the reversal model of chapter 08, shared with chapter 04 ------------------------------------
import transformer as course  # noqa: E402  (book/, on the path above)


def _short_training(monkeypatch):
    """The chapter's model and task with 6 training steps instead of 500: the cache's behaviour
    in a second, not a minute."""
    monkeypatch.setitem(learning.REVERSAL, "steps", 6)
    monkeypatch.setitem(learning.REVERSAL, "warmup", 2)


def _probe():
    src, tgt = learning.held_out_sequences()
    return src[:16], course.shift_right(tgt[:16], learning.START)


def test_cache_key_changes_with_the_training_code_settings_and_modules(monkeypatch, tmp_path):
    key = learning.reversal_cache_key()
    assert key == learning.reversal_cache_key()  # stable: a rebuild finds the weights
    with monkeypatch.context() as m:
        def reversal_loss(model, batch):  # another loss: another model
            return learning.reversal_loss(model, batch) * 2
        m.setattr(learning, "reversal_loss", reversal_loss)
        assert learning.reversal_cache_key() != key
    with monkeypatch.context() as m:
        m.setitem(learning.REVERSAL, "data_seed", 2)
        assert learning.reversal_cache_key() != key
    with monkeypatch.context() as m:
        edited = tmp_path / "transformer.py"
        edited.write_text(learning.Path(course.__file__).read_text() + "# an edit\n")
        m.setattr(course, "__file__", str(edited))
        assert learning.reversal_cache_key() != key  # transformer.py's text is part of the key
    assert learning.reversal_cache_key() == key


def test_cached_model_gives_the_same_weights_and_maps_as_a_fresh_one(monkeypatch, tmp_path):
    _short_training(monkeypatch)
    first, run = learning.trained_reversal_model(tmp_path)
    assert not run["cached"] and len(run["losses"]) == 6
    assert [p.name for p in tmp_path.iterdir()] == [f"reversal-{learning.reversal_cache_key()}.pt"]
    again, run_again = learning.trained_reversal_model(tmp_path)
    assert run_again["cached"] and run_again["losses"] == run["losses"]
    fresh, run_fresh = learning.trained_reversal_model(None)  # trained again, nothing kept
    assert not run_fresh["cached"] and run_fresh["losses"] == run["losses"]
    maps = [learning.head_weights(model, *_probe()) for model in (first, again, fresh)]
    assert len(maps[0]) == 6  # 2 encoder self-, 2 decoder self-, 2 cross-attentions
    for name, weights in maps[0].items():
        assert weights.shape[1] == 4  # (B, H, L, S), per head
        assert torch.equal(weights, maps[1][name]) and torch.equal(weights, maps[2][name]), name
    untrained = learning.head_weights(learning.reversal_model(), *_probe())
    assert not torch.equal(untrained[name], maps[0][name])  # 6 steps moved the weights


def test_head_weights_are_the_heads_of_the_attention_on_its_real_inputs():
    model = learning.reversal_model()
    src, tgt_in = _probe()
    maps = learning.head_weights(model, src, tgt_in)  # under no_grad: PyTorch's fast path is off
    x = model.embed(model.src_embed, src)  # the first encoder layer's input
    attn = model.transformer.encoder.layers[0].self_attn
    with torch.no_grad():
        _, expected = attn(x, x, x, key_padding_mask=src == learning.PAD, average_attn_weights=False)
    torch.testing.assert_close(maps["transformer.encoder.layers.0.self_attn"], expected)
    padding = (src == learning.PAD)[:, None, None, :]  # (B, 1, 1, S)
    assert maps["transformer.encoder.layers.0.self_attn"].masked_select(padding).abs().max() == 0
    causal = course.causal_mask(tgt_in.shape[1])
    assert maps["transformer.decoder.layers.0.self_attn"][..., causal].abs().max() == 0


def test_trained_cross_attention_heads_find_the_aligned_digit_and_random_ones_do_not():
    # The claim chapter 04 makes about the trained model (the build's cached weights, or a minute of training).
    trained, _ = learning.trained_reversal_model()
    src, tgt = learning.held_out_sequences()
    tgt_in = course.shift_right(tgt, learning.START)
    rows = torch.arange(tgt.shape[1])
    lengths = (src != learning.PAD).sum(1, keepdim=True)
    writes_digit, aligned = rows < lengths, (lengths - 1 - rows).clamp(min=0)  # (N, 9) each
    cross = "transformer.decoder.layers.1.multihead_attn"
    for model, low, high in [(trained, 0.5, 1.0), (learning.reversal_model(), 0.0, 0.3)]:
        weights = learning.head_weights(model, src, tgt_in)[cross]  # (N, 4, 9, 8)
        for h in range(weights.shape[1]):
            hits = (weights[:, h].argmax(-1) == aligned)[writes_digit].float().mean().item()
            assert low < hits < high, (h, hits)
