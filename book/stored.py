"""What the book computes while it is built, read back as data.

The models of chapters 08 to 10 are trained, and the experiments that need working versions of
graded functions are run, by ``python -m coursebuild.models`` (which ``make site`` runs first);
the results are files in book/data/ (PyTorch's ``torch.save`` of tensors, numbers and texts,
loaded with ``weights_only=True``: data, never code). A chapter reads them with ``load``; in Colab
its setup cell downloads them beside the notebook. The pages show that code in their answer cells
(tagged ``answers:<assignment>``, run again where the book shows them), which the students'
edition of a for-credit course withholds until the deadline: every other cell of a page draws
from these files, so that the page builds with or without its answer cells.
"""
from __future__ import annotations

from pathlib import Path

import torch

DATA = Path(__file__).resolve().parent / "data"


def load(name: str) -> dict:
    """The results stored as book/data/<name>, as a dict."""
    path = DATA / name
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing. In a clone of the course, run `python -m coursebuild.models` "
            "(`make site` does); in Colab, run this notebook's setup cell first.")
    return torch.load(path, weights_only=True)


def text(name: str) -> str:
    """The text file book/data/<name>."""
    path = DATA / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; in Colab, run this notebook's setup cell first.")
    return path.read_text(encoding="utf-8")
