"""Checks for assignment 02-softmax-scaling: softmax, scaled_scores, dot_product_variance and score_scale.

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

import math
import numbers
from typing import Any, Callable, Mapping, Sequence

import torch
import torch.nn.functional as F

from .core import (
    Case,
    Mistake,
    as_dtype,
    built_once_in_grader,
    case_seed,
    describe,
    generator,
    pick_device,
    randn,
    reference,
    run_check,
    with_defaults,
)

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

SOFTMAX_DEFAULTS = dict(shape=(2, 5), dim=-1, dtype="float32", std=1.0, shift=0.0, neg_inf=False)


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


def _try(f: Callable[[], torch.Tensor]) -> torch.Tensor | None:
    try:
        return f()
    except RuntimeError:  # a bug that only runs for some shapes (broadcasting)
        return None


def _softmax_mistakes(x: torch.Tensor, dim: int) -> dict[str, Mistake]:
    """Outputs of known buggy softmaxes. x is a CPU copy in the input's dtype, so that
    overflows happen as they do for the student; results are float64."""
    def f64(t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else t.double()

    d = dim % x.dim() if x.dim() else 0
    x64 = x.double()
    found: dict[str, Mistake] = {}

    def add(name: str, hint: str, out: torch.Tensor | None):
        if out is not None:
            found[name] = Mistake(hint, dict(softmax=f64(out)))

    e = x.exp()
    add("naive", "Your softmax overflows or underflows (exp of scores of magnitude 1e4 is inf or 0, giving "
        "inf/inf or 0/0 = nan): subtract the maximum along `dim` before exp, since softmax(x) = "
        "softmax(x - c) for any c constant along `dim`.", e / e.sum(dim, keepdim=True))
    g = (x - x.max()).exp()
    add("global max", "Subtract the maximum along `dim` (amax(dim, keepdim=True)), not the maximum of the "
        "whole tensor: a slice far below it underflows to 0/0 = nan.", g / g.sum(dim, keepdim=True))
    s = (x - x.amax(dim, keepdim=True)).exp()
    flat_max = lambda: (x - x.amax(dim)).exp()  # noqa: E731  (the maximum without keepdim)
    add("no keepdim (max)", "Use keepdim=True when you reduce along `dim`: without it the maximum is "
        "broadcast along the wrong axis.", _try(lambda: flat_max() / flat_max().sum(dim, keepdim=True)))
    add("no keepdim (sum)", "Use keepdim=True when you reduce along `dim`: without it the sum is broadcast "
        "along the wrong axis.", _try(lambda: s / s.sum(dim)))
    add("no keepdim", "Use keepdim=True when you reduce along `dim`: without it the maximum and the sum are "
        "broadcast along the wrong axis.", _try(lambda: flat_max() / flat_max().sum(dim)))
    for other in range(x.dim()):
        if other != d:
            add(f"dim {other}", f"Your result is normalised along dimension {other}, not along `dim` "
                f"(here {dim}): reduce along the dimension you are given.", x64.softmax(other))
    add("whole tensor", "Your result sums to 1 over the whole tensor: normalise along `dim` only "
        "(sum(dim, keepdim=True)).", s / s.sum())
    add("no division", "Your values are exp(x - max) without the division by their sum along `dim`: the "
        "softmax of every slice sums to 1.", s)
    add("log-softmax", "Your result is the log-softmax x - logsumexp(x): take its exp.",
        x64 - x64.logsumexp(dim, keepdim=True))
    add("-inf replaced", "Entries of -inf must get weight exactly 0 (exp(-inf) = 0): do not replace them "
        "by 0 or by a finite number.", torch.where(x64.isinf(), 0.0, x64).softmax(d))
    c = x - x.mean(dim, keepdim=True)
    add("mean subtracted", "Subtract the maximum along `dim`, not the mean: with the mean, exp still "
        "overflows for large scores, and a -inf entry makes the mean -inf (nan).",
        c.exp() / c.exp().sum(dim, keepdim=True))
    return found


@built_once_in_grader
def _softmax_case(spec: Mapping[str, Any], device: torch.device) -> Case:
    c = with_defaults(spec, SOFTMAX_DEFAULTS)
    dtype, shape, dim = as_dtype(c["dtype"]), tuple(c["shape"]), c["dim"]
    if not -len(shape) <= dim < len(shape):
        raise ValueError(f"dim {dim} out of range for shape {shape}")
    gen = generator(case_seed(spec, "softmax"))
    x = c["shift"] + randn(*shape, gen=gen, dtype=torch.float64, std=c["std"])
    if c["neg_inf"]:
        moved = x.movedim(dim, -1)  # the mask is drawn along the last dim, then moved back
        x = moved.masked_fill(_some_masked(tuple(moved.shape), gen), NEG_INF).movedim(-1, dim)
    x = x.to(dtype).contiguous()

    mine = x.clone()  # for the mistakes: the student may modify the input in place
    expected = dict(softmax=torch.softmax(reference(x), dim=dim))
    arg = x.to(device)
    return Case(
        inputs=describe(dict(x=arg, dim=dim), like=arg)
        + (", entries of magnitude 1e4" if max(abs(c["shift"]), c["std"]) >= 1e3 else "")
        + (", some entries -inf" if c["neg_inf"] else ""),
        run=lambda fn: fn(arg, dim=dim),
        expected=expected,
        like=arg,
        mistakes=lambda: _softmax_mistakes(mine, dim),
    )


def check_softmax(
    fn: Callable, *, points: float, cases: Sequence[Mapping[str, Any]], device: torch.device | None = None
):
    """Check softmax(x, dim=-1) against torch.softmax; calling torch.softmax, F.softmax or log_softmax
    (under any name) earns 0. See the module docstring for the cases."""
    __tracebackhide__ = True
    device = device or pick_device()
    return run_check("softmax", fn, [_softmax_case(c, device) for c in cases], points=points,
                     forbidden=FORBIDDEN_SOFTMAX)


# --------------------------------------------------------------------------
# scaled_scores

SCORES_DEFAULTS = dict(batch=(2,), L=5, S=None, d=8, dtype="float32", std=1.0)


def _scores_mistakes(q: torch.Tensor, k: torch.Tensor) -> dict[str, Mistake]:
    L, S, d = q.size(-2), k.size(-2), q.size(-1)
    qk = q @ k.transpose(-2, -1)  # (..., L, S)
    found = {
        "no scale": Mistake("Your scores are not scaled: divide q kᵀ by sqrt(d_k), with d_k = q.size(-1).",
                            dict(scores=qk)),
        "1/d": Mistake("Your scores are divided by d_k: divide them by sqrt(d_k).", dict(scores=qk / d)),
        "times sqrt(d)": Mistake("Your scores are multiplied by sqrt(d_k): divide them by it.",
                                 dict(scores=qk * math.sqrt(d))),
        "k q^T": Mistake("Your scores are k @ qᵀ, one row per key: they are q @ kᵀ / sqrt(d_k), of shape "
                         "(..., L, S), one row per query.", dict(scores=(k @ q.transpose(-2, -1)) / math.sqrt(d))),
    }
    for name, n in (("L", L), ("S", S)):
        if n != d:
            found[f"sqrt({name})"] = Mistake(
                f"Your scores are divided by sqrt({name}), the number of {'queries' if name == 'L' else 'keys'}: "
                "d_k is the width of the queries and keys, q.size(-1).", dict(scores=qk / math.sqrt(n)))
    return found


@built_once_in_grader
def _scores_case(spec: Mapping[str, Any], device: torch.device) -> Case:
    c = with_defaults(spec, SCORES_DEFAULTS)
    dtype, batch, L, d = as_dtype(c["dtype"]), tuple(c["batch"]), c["L"], c["d"]
    S = c["S"] or L
    gen = generator(case_seed(spec, "scaled_scores"))
    q = randn(*batch, L, d, gen=gen, dtype=dtype, std=c["std"])  # (*batch, L, d)
    k = randn(*batch, S, d, gen=gen, dtype=dtype, std=c["std"])  # (*batch, S, d)
    q64, k64 = reference(q), reference(k)
    expected = dict(scores=q64 @ k64.transpose(-2, -1) / math.sqrt(d))  # (*batch, L, S)
    args = [t.to(device) for t in (q, k)]
    return Case(
        inputs=describe(dict(q=args[0], k=args[1]), like=args[0]),
        run=lambda fn: fn(*args),
        expected=expected,
        like=args[0],
        mistakes=lambda: _scores_mistakes(q64, k64),
    )


def check_scaled_scores(
    fn: Callable, *, points: float, cases: Sequence[Mapping[str, Any]], device: torch.device | None = None
):
    """Check scaled_scores(q, k) -> q kᵀ / sqrt(d_k), (..., L, d), (..., S, d) -> (..., L, S)."""
    __tracebackhide__ = True
    device = device or pick_device()
    return run_check("scaled_scores", fn, [_scores_case(c, device) for c in cases], points=points)


# --------------------------------------------------------------------------
# dot_product_variance

VARIANCE_DEFAULTS = dict(n=1000, d_k=16, dtype="float32", std_q=1.0, std_k=1.0)


def _variance_mistakes(q: torch.Tensor, k: torch.Tensor) -> dict[str, Mistake]:
    n, d = q.shape
    s = (q * k).sum(-1)  # (n,)

    def one(hint: str, value: torch.Tensor) -> Mistake:
        return Mistake(hint, dict(variance=value))

    return {
        "biased": one("Your variance divides by n: use the unbiased estimate, which divides by n - 1 "
                      "(as torch.var does by default).", s.var(correction=0)),
        "products": one("Your result is the variance of the n·d_k products q_i k_i: a score is the dot "
                        "product of a whole query with a whole key, so sum over the d_k features first.",
                        (q * k).var()),
        "all pairs": one("Your result is the variance of all n·n entries of q @ kᵀ: pair row i of q with row i "
                         "of k only, (q * k).sum(-1), giving n dot products.", (q @ k.T).var()),
        "std": one("Your result is a standard deviation: return the variance (its square).", s.std()),
        "scaled": one("Your result is the variance of the scaled dot products q·k / sqrt(d_k): return that of "
                      "the raw dot products q·k.", (s / math.sqrt(d)).var()),
        "uncentred": one("Your result is the mean of the squared dot products: subtract their mean first "
                         "(the variance is the mean squared deviation from the mean).", (s**2).mean()),
    }


@built_once_in_grader
def _variance_case(spec: Mapping[str, Any], device: torch.device) -> Case:
    c = with_defaults(spec, VARIANCE_DEFAULTS)
    dtype, n, d = as_dtype(c["dtype"]), c["n"], c["d_k"]
    if n < 2:
        raise ValueError("the variance needs n >= 2 samples")
    gen = generator(case_seed(spec, "dot_product_variance"))
    q = randn(n, d, gen=gen, dtype=dtype, std=c["std_q"])  # (n, d_k)
    k = randn(n, d, gen=gen, dtype=dtype, std=c["std_k"])  # (n, d_k)
    q64, k64 = reference(q), reference(k)
    expected = dict(variance=torch.var((q64 * k64).sum(-1)))  # 0-dim, unbiased
    args = [t.to(device) for t in (q, k)]
    return Case(
        inputs=describe(dict(q=args[0], k=args[1]), like=args[0])
        + f", entries with std {c['std_q']:g} and {c['std_k']:g}",
        run=lambda fn: fn(*args),
        expected=expected,
        like=args[0],
        mistakes=lambda: _variance_mistakes(q64, k64),
    )


def check_dot_product_variance(
    fn: Callable, *, points: float, cases: Sequence[Mapping[str, Any]], device: torch.device | None = None
):
    """Check dot_product_variance(q, k) -> the unbiased variance of the n dot products q[i] · k[i]
    (a 0-dim tensor), for q, k of shape (n, d_k)."""
    __tracebackhide__ = True
    device = device or pick_device()
    return run_check("dot_product_variance", fn, [_variance_case(c, device) for c in cases], points=points)


# --------------------------------------------------------------------------
# score_scale: a number, not a tensor

SCALE_DEFAULTS = dict(d_k=64, var_q=None, var_k=None)


def _plain_number(result: Any) -> Any:
    """A real number as a Python float (a numpy float, a one-element float tensor); the rest as is."""
    if isinstance(result, numbers.Real) and not isinstance(result, bool):
        return float(result)
    if isinstance(result, torch.Tensor) and result.numel() == 1 and result.is_floating_point():
        return float(result.item())
    return result


@built_once_in_grader
def _scale_case(spec: Mapping[str, Any]) -> Case:
    c = with_defaults(spec, SCALE_DEFAULTS)
    d_k = c["d_k"]
    kwargs = {name: c[name] for name in ("var_q", "var_k") if c[name] is not None}
    v_q, v_k = kwargs.get("var_q", 1.0), kwargs.get("var_k", 1.0)
    right = 1 / math.sqrt(d_k * v_q * v_k)

    def mistakes() -> dict[str, Mistake]:
        wrong = {
            "no sqrt": ("Your factor is 1 / (d_k·var_q·var_k): multiplying the scores by c multiplies their "
                        "variance by c², so c = 1 / sqrt(d_k·var_q·var_k).", 1 / (d_k * v_q * v_k)),
            "variances ignored": ("Your factor ignores var_q and var_k: Var(q·k) = d_k·var_q·var_k, so "
                                  "c = 1 / sqrt(d_k·var_q·var_k).", 1 / math.sqrt(d_k)),
            "inverted": ("Your factor is sqrt(d_k·var_q·var_k): the scores are multiplied by c = 1 / sqrt(...), "
                         "which shrinks them.", math.sqrt(d_k * v_q * v_k)),
            "sqrt of d_k only": ("Your factor is 1 / (sqrt(d_k)·var_q·var_k): take the square root of the "
                                 "whole variance, c = 1 / sqrt(d_k·var_q·var_k).", 1 / (math.sqrt(d_k) * v_q * v_k)),
        }
        return {name: Mistake(hint, dict(scale=value)) for name, (hint, value) in wrong.items()}

    shown = ", ".join([f"d_k={d_k}"] + [f"{name}={value:g}" for name, value in kwargs.items()])
    return Case(
        inputs=shown,
        run=lambda fn: _plain_number(fn(d_k, **kwargs)),
        expected=dict(scale=right),  # a float: compared to 1e-6 relative
        like=torch.zeros(()),  # no tensor in or out
        mistakes=mistakes,
    )


def check_score_scale(
    fn: Callable, *, points: float, cases: Sequence[Mapping[str, Any]], device: torch.device | None = None
):
    """Check score_scale(d_k, var_q=1.0, var_k=1.0) -> the factor c for which c·(q·k) has variance 1,
    1 / sqrt(d_k·var_q·var_k): a Python float (a numpy float or a one-element tensor is read as one),
    compared to 1e-6 relative. `device` is unused (no tensors)."""
    __tracebackhide__ = True
    return run_check("score_scale", fn, [_scale_case(c) for c in cases], points=points)
