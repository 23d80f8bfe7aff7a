"""Checks for assignment 02-softmax-scaling: softmax, scaled_scores, dot_product_variance and score_scale
(inputs only; they are judged by attention_checks.answers.softmax_scaling).

A case is a small dict; every key is optional:

    softmax:              shape=(2, 5), dim=-1, dtype="float32", std=1.0, shift=0.0, neg_inf=False, seed
                          (x = shift + std * normal; std=1e4 or shift=±1e4 give inputs of magnitude 1e4;
                          neg_inf=True sets some entries to -inf, never a whole slice along dim)
    scaled_scores:        batch=(2,), L=5, S=L, d=8, dtype="float32", std=1.0, seed
    dot_product_variance: n=1000, d_k=16, dtype="float32", std_q=1.0, std_k=1.0, seed
    score_scale:          d_k=64, var_q, var_k (passed as keywords only when the case sets them)

`batch` holds the leading dims, e.g. (1,) or (2, 3) or (). Without a seed, one is derived from the case.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch
import torch.nn.functional as F

from .cases import Inputs
from .core import as_dtype, describe, randn
from .record import plain_number
from .localise import axis, ladder
from .registry import Check, declare

NEG_INF = float("-inf")


# Display names end with the identifier a student's code would spell (the grader also scans the
# student's source for it); every way to that function shows the same name.
_SOFTMAX_FUNCTIONS = {
    "torch.softmax": [torch.softmax, torch.Tensor.softmax, F.softmax, torch.special.softmax, torch.sparse.softmax,
                      "masked.softmax", "aten::softmax"],
    "torch.log_softmax": [torch.log_softmax, torch.Tensor.log_softmax, F.log_softmax, torch.special.log_softmax,
                          torch.sparse.log_softmax, "masked.log_softmax", "aten::log_softmax"],
    "F.softmin": [F.softmin, "masked.softmin"],  # softmin(x) is softmax(-x)
    "torch._softmax": ["_softmax", "aten::_softmax"],
    "torch._log_softmax": ["_log_softmax", "aten::_log_softmax"],
    "torch._safe_softmax": ["_safe_softmax", "aten::_safe_softmax"],
    "torch._masked_softmax": ["_masked_softmax", "aten::_masked_softmax"],
    "torch.ops.aten.special_softmax": ["aten::special_softmax"],
    "torch.ops.aten.special_log_softmax": ["aten::special_log_softmax"],
    "torch.ops.aten._sparse_softmax": ["aten::_sparse_softmax"],
    "torch.ops.aten._sparse_log_softmax": ["aten::_sparse_log_softmax"],
    "torch.ops.aten._nested_tensor_softmax_with_shape": ["aten::_nested_tensor_softmax_with_shape"],
    # modules, for the grader's scan of the source (their calls reach F.softmax & co. above)
    "nn.Softmax": [torch.nn.Softmax],
    "nn.Softmax2d": [torch.nn.Softmax2d],
    "nn.LogSoftmax": [torch.nn.LogSoftmax],
    "nn.Softmin": [torch.nn.Softmin],
}


def _forbidden(table: Mapping[str, Sequence[Any]]) -> dict[Any, str]:
    """{function or "aten::op": name shown}. A plain string other than "aten::..." names an attribute
    of torch (or "masked.x" of torch.masked), kept only where this torch has it."""
    found: dict[Any, str] = {}
    for shown, keys in table.items():
        for key in keys:
            if isinstance(key, str) and not key.startswith("aten::"):
                owner, _, attr = key.rpartition(".")
                key = getattr(getattr(torch, owner, None) if owner else torch, attr, None)
                if not callable(key):
                    continue
            found[key] = shown
    return found


# The API softmax mirrors, under every name it can be reached by: Python functions and methods,
# and the aten operators (torch.ops.aten.*, any overload).
FORBIDDEN_SOFTMAX = _forbidden(_SOFTMAX_FUNCTIONS)


# --------------------------------------------------------------------------
# softmax


def _some_masked(shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    """Random boolean mask over the last dim, True = set to -inf: about a third of each row, and
    never a whole row (a row of -inf is not tested: its softmax is nan)."""
    *rows, n = shape
    if n < 2:
        return torch.zeros(shape, dtype=torch.bool)
    masked = torch.rand(shape, generator=gen, dtype=torch.float64) < 0.35
    keep = torch.randint(n, (*rows, 1), generator=gen)  # one finite entry per row
    drop = (keep + torch.randint(1, n, (*rows, 1), generator=gen)) % n  # and one -inf, elsewhere
    return masked.scatter(-1, keep, False).scatter(-1, drop, True)



def _softmax_inputs(c: dict[str, Any], gen: torch.Generator) -> Inputs:
    dtype, shape, dim = as_dtype(c["dtype"]), tuple(c["shape"]), c["dim"]
    if not -len(shape) <= dim < len(shape):
        raise ValueError(f"dim {dim} out of range for shape {shape}")
    x = c["shift"] + randn(*shape, gen=gen, dtype=torch.float64, std=c["std"])
    if c["neg_inf"]:
        moved = x.movedim(dim, -1)  # the mask is drawn along the last dim, then moved back
        x = moved.masked_fill(_some_masked(tuple(moved.shape), gen), NEG_INF).movedim(-1, dim)
    return Inputs(dict(x=x.to(dtype).contiguous()), dict(dim=dim))


def _softmax_describe(x: Inputs, c: dict[str, Any]) -> str:
    return (describe(x.named, like=x.like) + (", entries of magnitude 1e4" if max(abs(c["shift"]), c["std"]) >= 1e3
                                              else "") + (", some entries -inf" if c["neg_inf"] else ""))


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
SOFTMAX_AXES = ladder(
    dict(shape=(1, 3), dtype="float64"),
    axis("one row", "the dim you normalise over", (dict(shape=(3, 3)), "three rows"), (dict(shape=(2, 3, 4)), "three dims")),
    axis("dim=-1", "the dim you normalise over (the one you are given)", (dict(shape=(3, 2), dim=0), "dim=0")),
    axis("entries of magnitude 1", "the maximum subtracted before exp", (dict(shift=1e4), "entries near 1e4"),
         (dict(std=1e4), "entries of magnitude 1e4")),
    axis("finite entries", "entries of -inf (exp gives 0)", (dict(shape=(2, 5), neg_inf=True), "some entries -inf")),
)

check_softmax = declare(Check(
    name="softmax", assignment="02-softmax-scaling",
    axes=SOFTMAX_AXES,
    defaults=dict(shape=(2, 5), dim=-1, dtype="float32", std=1.0, shift=0.0, neg_inf=False),
    inputs=_softmax_inputs, outputs=("softmax",), describe=_softmax_describe, forbidden=FORBIDDEN_SOFTMAX,
))


# --------------------------------------------------------------------------
# scaled_scores


def _scores_inputs(c: dict[str, Any], gen: torch.Generator) -> Inputs:
    dtype, batch, L, d = as_dtype(c["dtype"]), tuple(c["batch"]), c["L"], c["d"]
    q = randn(*batch, L, d, gen=gen, dtype=dtype, std=c["std"])  # (*batch, L, d)
    k = randn(*batch, c["S"] or L, d, gen=gen, dtype=dtype, std=c["std"])  # (*batch, S, d)
    return Inputs(dict(q=q, k=k))


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
SCALED_SCORES_AXES = ladder(
    dict(batch=(1,), L=2, d=1, dtype="float64"),
    axis("d=1 (scale 1)", "the scale 1/sqrt(d)", (dict(d=4), "d=4 (scale 1/2)")),
    axis("as many keys as queries", "which axes you transpose (the keys' length is the last axis)",
         (dict(S=3), "3 keys for 2 queries")),
    axis("one leading dim", "how the leading dims are kept apart", (dict(batch=(2, 3)), "leading dims (2, 3)")),
)

check_scaled_scores = declare(Check(
    name="scaled_scores", assignment="02-softmax-scaling",
    axes=SCALED_SCORES_AXES,
    defaults=dict(batch=(2,), L=5, S=None, d=8, dtype="float32", std=1.0),
    inputs=_scores_inputs, outputs=("scores",),
))


# --------------------------------------------------------------------------
# dot_product_variance


def _variance_inputs(c: dict[str, Any], gen: torch.Generator) -> Inputs:
    dtype, n, d = as_dtype(c["dtype"]), c["n"], c["d_k"]
    if n < 2:
        raise ValueError("the variance needs n >= 2 samples")
    q = randn(n, d, gen=gen, dtype=dtype, std=c["std_q"])  # (n, d_k)
    k = randn(n, d, gen=gen, dtype=dtype, std=c["std_k"])  # (n, d_k)
    return Inputs(dict(q=q, k=k))


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
VARIANCE_AXES = ladder(
    dict(n=200, d_k=1, dtype="float64"),
    axis("d_k=1", "the sum over the d_k features of each product", (dict(d_k=4), "d_k=4")),
    axis("std 1 for q and k", "how the inputs' spreads enter", (dict(std_q=2.0), "q of std 2"), (dict(std_k=3.0), "k of std 3")),
    axis("200 samples", "what you average over (the samples, not the features)", (dict(n=50), "50 samples")),
)

check_dot_product_variance = declare(Check(
    name="dot_product_variance", assignment="02-softmax-scaling",
    axes=VARIANCE_AXES,
    defaults=dict(n=1000, d_k=16, dtype="float32", std_q=1.0, std_k=1.0),
    inputs=_variance_inputs, outputs=("variance",),
    describe=lambda x, c: describe(x.named, like=x.like) + f", entries with std {c['std_q']:g} and {c['std_k']:g}",
))


# --------------------------------------------------------------------------
# score_scale: a number, not a tensor


def _scale_inputs(c: dict[str, Any], gen: torch.Generator) -> Inputs:
    # var_q, var_k passed as keywords only when the case sets them
    return Inputs(dict(d_k=c["d_k"]), {name: c[name] for name in ("var_q", "var_k") if c[name] is not None})


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
SCALE_AXES = ladder(
    dict(d_k=4),
    axis("d_k=4", "the square root of d_k", (dict(d_k=64), "d_k=64")),
    axis("unit variances", "how var_q and var_k enter (their product, times d_k)", (dict(var_q=2.0), "var_q=2"),
         (dict(var_k=3.0), "var_k=3"), (dict(var_q=2.0, var_k=3.0), "var_q=2 and var_k=3")),
)

check_score_scale = declare(Check(
    name="score_scale", assignment="02-softmax-scaling", defaults=dict(d_k=64, var_q=None, var_k=None),
    axes=SCALE_AXES,
    inputs=_scale_inputs, outputs=("scale",), on_device=False,
    call=lambda fn, x, c: plain_number(fn(*x.args.values(), **x.kwargs)),
    describe=lambda x, c: ", ".join([f"d_k={c['d_k']}"] + [f"{n}={v:g}" for n, v in x.kwargs.items()]),
))
