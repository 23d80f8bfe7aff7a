"""Training small models at build time, and drawing what they learned.

The chapters that train a model (07 onward) import from here in a hidden cell, as
they import ``plots``. Everything is deterministic: ``seed_everything`` fixes the
seeds, pins PyTorch to one thread and turns on deterministic algorithms, and
``train`` draws its batches from a private generator, so a chapter's figures come
out the same on every build.

- ``seed_everything``: seeds, one thread, deterministic algorithms.
- ``train``: a seeded training loop (Adam, gradient clipping) that returns the loss
  of every step; the model and the task stay the caller's business.
- ``accuracy``: the share of right predictions, for classification and per-token
  (sequence) outputs, optionally ignoring padding targets.
- ``plot_losses``: loss curves, smoothed.
- ``attention_before_after``: two attention heatmaps side by side, before and after
  training, on the same colour scale.

The reversal task of chapter 08, shared with chapter 04 (which shows the heads of the
trained model), so that a site build trains that model once:

- ``reversal_batch``, ``training_batch``, ``held_out_sequences``, ``warmup_then_decay``:
  the data and the learning-rate schedule; ``REVERSAL`` holds every training setting.
- ``load_reversal``: the model before and after training, as ``python -m coursebuild.models``
  trained it at build time (its loss uses teacher forcing, which the exercise grades), read
  from book/data/.
- ``head_weights``: the per-head attention weights of every attention of a model.
- ``show_source``: a function's code as a code block, for a chapter to show what it imports.
"""
from __future__ import annotations

import functools
import inspect
import random
import time
from typing import Any, Callable, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

import stored
import transformer as course
from plots import to_numpy

__all__ = ["seed_everything", "train", "accuracy", "plot_losses", "attention_before_after",
           "REVERSAL", "reversal_batch", "held_out_sequences", "training_batch", "warmup_then_decay",
           "load_reversal", "head_weights", "show_source"]


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and PyTorch; one thread and deterministic kernels.

    Call it right before building a model, so that its initial weights depend only on
    ``seed``. One thread: a float sum in another order gives other last bits, and after
    a few hundred training steps other figures.
    """
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


def train(model: torch.nn.Module, make_batch: Callable[[torch.Generator], Any],
          loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor], *, steps: int,
          lr: float = 1e-2, seed: int = 0, clip: float = 1.0,
          weight_decay: float = 0.0,
          schedule: Callable[[int], float] | None = None) -> dict[str, Any]:
    """Train ``model`` for ``steps`` steps of Adam; returns the loss curve and the time.

    ``make_batch(generator)`` returns one batch (any object) drawn with the given
    ``torch.Generator``; ``loss_fn(model, batch)`` returns a scalar loss. The data come
    from a private generator seeded with ``seed``, and ``torch.manual_seed(seed)``
    fixes dropout, so two calls with the same model weights give the same curve.
    Gradients are clipped to norm ``clip`` (``None``: no clipping): recurrent nets
    and attention can take a wild step early on.

    ``schedule(step)``, if given, multiplies ``lr`` at each step (e.g. a warm-up then a
    decay, as Transformers are usually trained).

    Returns ``{"losses": [float per step], "seconds": wall time}``; the model is left
    in eval mode.
    """
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    scheduler = None if schedule is None else torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    losses = []
    start = time.perf_counter()
    model.train()
    for _ in range(steps):
        loss = loss_fn(model, make_batch(gen))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        losses.append(loss.item())
    model.eval()
    return {"losses": losses, "seconds": time.perf_counter() - start}


def accuracy(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int | None = None,
             per_sequence: bool = False) -> float:
    """Share of right predictions: ``logits`` (..., C), ``targets`` (...) class ids.

    Classification: logits (B, C), targets (B,). Sequences: logits (B, L, C), targets
    (B, L); targets equal to ``ignore_index`` (padding) do not count. With
    ``per_sequence`` a sequence counts as right only if all its counted tokens are.
    """
    right = logits.argmax(dim=-1) == targets  # (...)
    counted = torch.ones_like(right) if ignore_index is None else targets != ignore_index
    right = right | ~counted  # ignored positions never make a sequence wrong
    if per_sequence:
        return right.reshape(right.shape[0], -1).all(dim=-1).float().mean().item()
    return (right & counted).sum().item() / max(counted.sum().item(), 1)


def plot_losses(ax, curves: Mapping[str, Sequence[float]], window: int = 20,
                ylabel: str = "training loss", log: bool = False) -> None:
    """Loss curves (name -> loss per step), each as a moving average over ``window`` steps
    over its raw curve in a lighter shade."""
    for i, (name, losses) in enumerate(curves.items()):
        losses = np.asarray(losses, dtype=float)
        colour = f"C{i}"
        ax.plot(losses, color=colour, alpha=0.25, lw=0.8)
        if len(losses) >= window:
            smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
            ax.plot(np.arange(window - 1, len(losses)), smooth, color=colour, lw=1.8, label=name)
        else:
            ax.plot([], [], color=colour, label=name)
    ax.set_xlabel("training step")
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)


def attention_before_after(before, after, *, cell_labels=None, xlabels=None, ylabels=None,
                           titles=("before training", "after training"), xlabel="position",
                           ylabel="", highlight=None, vmax=None, figsize=None, cmap="Blues",
                           vertical=False):
    """Two heatmaps of attention weights side by side (or, ``vertical``, one above the
    other, for wide ones), on one colour scale.

    ``before`` and ``after`` are 2-D (rows x columns): one row per example (attention
    pooling) or per query (self- or cross-attention). Label the columns with
    ``xlabels`` (shared by every row, e.g. source tokens) or write a label in every
    cell with ``cell_labels`` (rows x columns strings, e.g. each example's tokens);
    ``ylabels`` names the rows. ``highlight``: a boolean rows x columns array of cells
    to frame (the positions that matter). Returns the figure.
    """
    before, after = to_numpy(before), to_numpy(after)
    rows, cols = before.shape
    vmax = float(max(before.max(), after.max())) if vmax is None else vmax
    if figsize is None:
        width, height = min(1.6 + 0.36 * cols, 9.0), 0.9 + 0.3 * rows
        figsize = (width, 2 * height) if vertical else (2 * width, height)
    fig, axes = plt.subplots(2 if vertical else 1, 1 if vertical else 2, figsize=figsize,
                             layout="constrained", sharey=True, sharex=vertical)
    for ax, weights, title in zip(axes, (before, after), titles):
        im = ax.imshow(weights, cmap=cmap, vmin=0.0, vmax=vmax, aspect="auto")
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        if xlabels is not None:
            ax.set_xticks(range(cols), xlabels, fontsize=7)
        else:
            ax.set_xticks(range(0, cols, max(1, cols // 10)))
        if ylabels is not None:
            ax.set_yticks(range(rows), ylabels, fontsize=7)
        else:
            ax.set_yticks([])
        if cell_labels is not None:
            for i in range(rows):
                for j in range(cols):
                    r, g, b, _ = im.cmap(im.norm(weights[i, j]))
                    dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
                    ax.text(j, i, str(cell_labels[i][j]), ha="center", va="center", fontsize=6.5,
                            color="white" if dark else "black")
        if highlight is not None:
            for i, j in zip(*np.nonzero(to_numpy(highlight))):
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="#d62728",
                                           lw=1.4))
    for ax in axes if vertical else axes[:1]:
        ax.set_ylabel(ylabel)
    fig.colorbar(im, ax=axes, shrink=0.9, label="attention weight")
    return fig


# ---- the reversal task of chapter 08 ----------------------------------------------------------
# coursebuild/reversal.py trains on it at build time; chapters 08 and 09 load the result.

PAD, START, END, VOCAB, MAX_LEN = 0, 1, 2, 13, 8  # digits 0-9 are the ids 3-12
REVERSAL = dict(  # everything that decides the trained weights, besides the code below
    model=dict(vocab_size=VOCAB, d_model=64, nhead=4, num_layers=2, dim_feedforward=128, dropout=0.0),
    init_seed=0, data_seed=1, test_seed=1234, test_size=1000, batch_size=256,
    steps=500, warmup=50, lr=6e-3)


def reversal_batch(gen: torch.Generator, n: int):
    """n random sequences: src (n, 8) padded with PAD, tgt (n, 9) reversed + END, padded."""
    lengths = torch.randint(3, MAX_LEN + 1, (n, 1), generator=gen)  # (n, 1)
    pos = torch.arange(MAX_LEN + 1)  # (9,)
    digits = torch.randint(3, VOCAB, (n, MAX_LEN), generator=gen)
    src = digits.masked_fill(pos[:MAX_LEN] >= lengths, PAD)
    backwards = (lengths - 1 - pos).clamp(min=0)  # (n, 9): target position t reads source L-1-t
    tgt = src.gather(1, backwards[:, :MAX_LEN].clamp(max=MAX_LEN - 1))
    tgt = torch.cat([tgt, tgt[:, :1]], dim=1)  # (n, 9)
    tgt = torch.where(pos < lengths, tgt, torch.where(pos == lengths, END, PAD))
    return src, tgt


def _code(src):  # one integer per sequence, to recognise the held-out ones
    return (src * 13 ** torch.arange(MAX_LEN)).sum(1)


def held_out_sequences():
    """The 1,000 held-out sequences (src (1000, 8), tgt (1000, 9)), never trained on."""
    return reversal_batch(torch.Generator().manual_seed(REVERSAL["test_seed"]), REVERSAL["test_size"])


@functools.lru_cache(maxsize=1)
def _held_out_codes() -> torch.Tensor:
    return _code(held_out_sequences()[0])  # (1000,)


def training_batch(gen: torch.Generator):
    """A batch of 256 fresh sequences minus those that happen to be in the test set."""
    src, tgt = reversal_batch(gen, REVERSAL["batch_size"])
    keep = ~torch.isin(_code(src), _held_out_codes())  # never train on a test sequence
    return src[keep], tgt[keep]


def warmup_then_decay(step: int) -> float:
    """The learning rate's factor at ``step``: a linear warm-up, then a linear decay to 0 at the last step."""
    steps, warmup = REVERSAL["steps"], REVERSAL["warmup"]
    return min((step + 1) / warmup, (steps - step) / (steps - warmup))


def load_reversal():
    """Chapter 08's reversal Transformer, as ``python -m coursebuild.models`` trained it (chapter 09
    reuses it): ``(untrained, trained, run)``, the model with its seeded initial weights, the same
    model trained, and the run: ``"losses"`` (one per step), ``"seconds"`` and ``"cpu_seconds"``
    of the training, the held-out sequences' decoder inputs ``"test_tgt_in"`` (teacher forcing:
    START, then the target without its last token) and the greedy decodings of the held-out
    sources before and after training, ``"decoded_before"`` and ``"decoded_after"`` (1000, 9)."""
    saved = stored.load("reversal.pt")
    models = []
    for weights in (saved["untrained"], saved["trained"]):
        model = course.Seq2Seq(**REVERSAL["model"])
        model.load_state_dict(weights)
        models.append(model.eval())
    return models[0], models[1], saved["run"]


def show_source(*functions):
    """The source of ``functions`` as a Python code block (a Markdown output, which the book
    and Jupyter both highlight): a chapter shows the code it imports from here."""
    from IPython.display import Markdown

    code = "\n\n\n".join(inspect.getsource(f).strip() for f in functions)  # PEP 8: two blank lines
    return Markdown(f"```python\n{code}\n```")


@torch.no_grad()
def head_weights(model: torch.nn.Module, *inputs) -> dict[str, torch.Tensor]:
    """Every attention's per-head weights when ``model(*inputs)`` runs: name -> (B, H, L, S).

    PyTorch's layers ask their attention for no weights; this runs the model once,
    records each ``nn.MultiheadAttention``'s arguments, and calls it again on them with
    ``need_weights=True, average_attn_weights=False`` (a module called more than once
    gives its last call's weights). Names are the modules' own, e.g.
    ``transformer.encoder.layers.0.self_attn``. PyTorch's fast path for inference
    (fused encoder layers that never call their ``self_attn``) is off meanwhile.
    """
    calls, hooks = {}, []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.MultiheadAttention):
            record = lambda m, args, kwargs, name=name: calls.__setitem__(name, (m, args, kwargs))
            hooks.append(module.register_forward_pre_hook(record, with_kwargs=True))
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        model(*inputs)
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)
        for hook in hooks:
            hook.remove()
    return {name: m(*args, **{**kwargs, "need_weights": True, "average_attn_weights": False})[1]
            for name, (m, args, kwargs) in calls.items()}
