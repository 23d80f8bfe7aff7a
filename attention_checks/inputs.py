"""Inputs shared by the checks: random masks in both conventions, and lengths of padded batches.

Every generator here is a private CPU generator from the case's seed (``core.generator``):
a case gives the same inputs on every device and in every process.
"""
from __future__ import annotations

import torch


def keep_mask(shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    """Random boolean mask, True = may attend (F.scaled_dot_product_attention's convention).
    Every row keeps a key and masks a key, so that neither the mask nor its inverse hides a
    whole row (whose result is undefined)."""
    *rows, S = shape
    assert S >= 2, "masks need at least 2 keys"
    keep = torch.rand(shape, generator=gen, dtype=torch.float64) < 0.6
    first = torch.randint(S, (*rows, 1), generator=gen)
    other = (first + torch.randint(1, S, (*rows, 1), generator=gen)) % S  # a different key of the same row
    return keep.scatter(-1, first, True).scatter(-1, other, False)


def block_mask(shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    """The same random mask in nn.MultiheadAttention's convention: True = may NOT attend."""
    return ~keep_mask(shape, gen)


def padding_lengths(batch: int, length: int, gen: torch.Generator) -> torch.Tensor:
    """Random lengths of a right-padded batch, (batch,) int64 in [1, length]: every sequence
    keeps a position, and (for batch > 1 and length > 1) one is full and one is padded."""
    lengths = torch.randint(1, length + 1, (batch,), generator=gen)
    if batch > 1 and length > 1:
        lengths[0] = length
        lengths[1] = torch.randint(1, length, (1,), generator=gen)
    return lengths


def pad_mask(lengths: torch.Tensor, length: int) -> torch.Tensor:
    """The key padding mask of those lengths, (batch, length) bool, True at padding."""
    return torch.arange(length)[None, :] >= lengths[:, None]
