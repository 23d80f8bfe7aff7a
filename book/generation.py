"""Chapter 10's character language models: their settings, their text, and what they did.

The models (a small decoder-only Transformer over characters, with learned, sinusoidal,
rotary or ALiBi positions) use the functions that chapter 10's exercise grades, so they are
trained, and every experiment on them is run, at build time by ``python -m coursebuild.models``
from code that is not published. This module holds what the page needs to show the results:

- ``SETTINGS``, ``POSITIONS``: the models' and the training's settings, the four kinds of position.
- ``load_text``: the training text, book/data/course-text-v1.txt: the prose of chapters 01 to 08
  without their code, a versioned file, so that edits to the chapters do not retrain the models;
  ``CharData`` turns it into ids and random windows (the first 90% to train on, the rest held out).
- ``load_results``: book/data/chargpt.pt, the losses, the held-out loss at every position, the
  next-character distributions, the samples and the beam-search completions.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

import stored

__all__ = ["SETTINGS", "POSITIONS", "TEXT", "CharData", "load_text", "load_results"]

POSITIONS = ("learned", "sinusoidal", "rope", "alibi")
SETTINGS = dict(d_model=64, nhead=4, num_layers=2, dim_feedforward=128, context=32, max_len=128,
                batch_size=32, steps=400, warmup=40, lr=5e-3, init_seed=0, data_seed=1)
TEXT = "course-text-v1.txt"  # a new version: python -m coursebuild.chargpt write-text 2, then name it here


def load_text() -> str:
    """The training text (printable ASCII; other characters were written as '?')."""
    return stored.text(TEXT)


def load_results() -> dict:
    """What ``python -m coursebuild.models`` computed for chapter 10 (see coursebuild/chargpt.py)."""
    return stored.load("chargpt.pt")


@dataclass
class CharData:
    """The text as ids: the first 90% to train on, the rest held out."""

    text: str

    def __post_init__(self):
        self.chars = sorted(set(self.text))
        self.index = {c: i for i, c in enumerate(self.chars)}
        ids = self.encode(self.text)
        split = int(0.9 * len(ids))
        self.train, self.valid = ids[:split], ids[split:]

    def encode(self, text: str) -> torch.Tensor:
        return torch.tensor([self.index[c] for c in text])

    def decode(self, ids) -> str:
        return "".join(self.chars[i] for i in ids)

    def windows(self, ids: torch.Tensor, gen: torch.Generator, n: int, length: int) -> torch.Tensor:
        """n random windows of length + 1 ids: the inputs and, one step on, the targets."""
        starts = torch.randint(len(ids) - length - 1, (n,), generator=gen)
        return torch.stack([ids[s:s + length + 1] for s in starts.tolist()])  # (n, length + 1)
