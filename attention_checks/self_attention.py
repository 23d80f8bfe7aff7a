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
from .localise import MORE_THAN_ONE_TOKEN, axis, ladder
from .registry import Check, declare

DEFAULTS = dict(B=2, L=5, D=8, dtype="float32", std=1.0)


def _inputs(c: dict[str, Any], gen: torch.Generator) -> Inputs:
    x = randn(c["B"], c["L"], c["D"], gen=gen, dtype=as_dtype(c["dtype"]), std=c["std"])  # (B, L, D)
    return Inputs(dict(x=x))


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
SCORES_AXES = ladder(
    dict(B=1, L=2, D=2, dtype="float64"),
    axis("2 tokens", "the pairs of tokens (query i, key j): which axes you multiply", (dict(L=4), "4 tokens")),
    axis("2 features", "the features you sum over", (dict(D=1), "one feature"), downward=True),
    axis("2 features", "the features you sum over (the last axis)", (dict(D=5), "5 features")),
    axis("a batch of one", "how the batch is kept apart", (dict(B=3), "a batch of 3")),
)

check_attention_scores = declare(Check(
    name="attention_scores", assignment="01-self-attention", defaults=DEFAULTS, inputs=_inputs,
    axes=SCORES_AXES,
    outputs=("scores",),
))

# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
SELF_ATTENTION_AXES = ladder(
    dict(B=1, L=2, D=2, dtype="float64"),
    axis("2 tokens", MORE_THAN_ONE_TOKEN, (dict(L=1), "one token (its weight is 1)"), downward=True),
    axis("2 features", "the scale 1/sqrt(D)", (dict(D=1), "one feature (scale 1)"), downward=True),
    axis("2 tokens", "the softmax over the keys (each row of weights sums to 1)", (dict(L=4), "4 tokens")),
    axis("2 features", "the scale 1/sqrt(D) and the features you sum over", (dict(D=8), "8 features")),
    axis("a batch of one", "how the batch is kept apart", (dict(B=3), "a batch of 3")),
)

check_simple_self_attention = declare(Check(
    name="simple_self_attention", assignment="01-self-attention", defaults=DEFAULTS, inputs=_inputs,
    axes=SELF_ATTENTION_AXES,
    outputs=("output", "weights"),
))
