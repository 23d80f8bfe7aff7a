"""How 02-softmax-scaling is judged: references and known mistakes of softmax, scaled_scores,
dot_product_variance and score_scale."""
from __future__ import annotations

import math
from typing import Callable

import torch

from ..cases import Inputs, Spec
from ..core import as_dtype
from .catalogue import Answer, Mistake


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



def _softmax_reference(x: Inputs, spec: Spec) -> dict[str, torch.Tensor]:
    return dict(softmax=torch.softmax(x.args["x"], dim=spec["dim"]))


def _softmax_answer_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    # in the input's dtype (exact: a float64 copy of it), so that overflows happen as for the student
    return _softmax_mistakes(x.args["x"].to(as_dtype(spec["dtype"])), spec["dim"])


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



def _scores_reference(x: Inputs, spec: Spec) -> dict[str, torch.Tensor]:
    q, k = x.args["q"], x.args["k"]
    return dict(scores=q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)))  # (*batch, L, S)


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



def _scale_args(spec: Spec) -> tuple[int, float, float]:
    return spec["d_k"], spec["var_q"] or 1.0, spec["var_k"] or 1.0


def _scale_reference(x: Inputs, spec: Spec) -> dict[str, float]:
    d_k, v_q, v_k = _scale_args(spec)
    return dict(scale=1 / math.sqrt(d_k * v_q * v_k))  # a float: compared to 1e-6 relative


def _scale_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    d_k, v_q, v_k = _scale_args(spec)
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



ANSWERS = {
    "softmax": Answer(_softmax_reference, _softmax_answer_mistakes),
    "scaled_scores": Answer(_scores_reference, lambda x, spec, expected: _scores_mistakes(x.args["q"], x.args["k"])),
    "dot_product_variance": Answer(
        lambda x, spec: dict(variance=torch.var((x.args["q"] * x.args["k"]).sum(-1))),  # 0-dim, unbiased
        lambda x, spec, expected: _variance_mistakes(x.args["q"], x.args["k"])),
    "score_scale": Answer(_scale_reference, _scale_mistakes),
}
