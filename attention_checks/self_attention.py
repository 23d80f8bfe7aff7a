"""Checks for assignment 01-self-attention: attention_scores and simple_self_attention (inputs
only; they are judged by attention_checks.answers.self_attention).

A case is a small dict; every key is optional:

    B=2, L=5, D=8, dtype="float32", std=1.0, seed

The input x is (B, L, D) with normal entries of standard deviation `std`. Keep
std * std * sqrt(D) of order 1 (e.g. std=0.3 for D=128): with larger entries the
softmax is nearly one-hot and a missing 1/sqrt(D) no longer shows.
Without a seed, one is derived from the case.
"""

from __future__ import annotations

from typing import Any

import torch

from .cases import Inputs
from .core import as_dtype, randn
from .registry import Check, declare

DEFAULTS = dict(B=2, L=5, D=8, dtype="float32", std=1.0)


def _inputs(c: dict[str, Any], gen: torch.Generator) -> Inputs:
    x = randn(c["B"], c["L"], c["D"], gen=gen, dtype=as_dtype(c["dtype"]), std=c["std"])  # (B, L, D)
    return Inputs(dict(x=x))


check_attention_scores = declare(Check(
    name="attention_scores", assignment="01-self-attention", defaults=DEFAULTS, inputs=_inputs,
    outputs=("scores",),
))

check_simple_self_attention = declare(Check(
    name="simple_self_attention", assignment="01-self-attention", defaults=DEFAULTS, inputs=_inputs,
    outputs=("output", "weights"),
))
