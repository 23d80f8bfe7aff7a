"""How 01-self-attention is judged: references and known mistakes of attention_scores and
simple_self_attention, on the float64 CPU input x (B, L, D)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .catalogue import Answer, Mistake, swapped_outputs


def _scores_mistakes(x: torch.Tensor) -> dict[str, Mistake]:
    """Outputs of known buggy attention_scores, on the CPU float64 input x (B, L, D)."""
    D = x.size(-1)
    scores = x @ x.transpose(-2, -1)  # (B, L, L)
    return {
        "scaled": Mistake(
            "Your scores are divided by sqrt(D): attention_scores returns the raw dot products x @ xᵀ; "
            "the scaling belongs to simple_self_attention.",
            dict(scores=scores / math.sqrt(D)),
        ),
        "gram of features": Mistake(
            "Your result is xᵀ @ x, of shape (B, D, D): the scores compare tokens with tokens, "
            "so they are x @ xᵀ, of shape (B, L, L) (transpose the last two dims of the second factor).",
            dict(scores=x.transpose(-2, -1) @ x),
        ),
        "elementwise": Mistake(
            "Your result is x * x, an elementwise product: a score is the dot product of two token "
            "vectors, a matrix product x @ xᵀ.",
            dict(scores=x * x),
        ),
        "softmax": Mistake(
            "Your result looks like softmax weights: attention_scores returns the scores before any softmax.",
            dict(scores=scores.softmax(-1)),
        ),
        "scaled softmax": Mistake(
            "Your result looks like the attention weights softmax(x xᵀ / sqrt(D)): attention_scores "
            "returns the raw scores x @ xᵀ.",
            dict(scores=(scores / math.sqrt(D)).softmax(-1)),
        ),
    }


def self_attention_reference(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """CPU float64 reference: the output from PyTorch itself (Q = K = V = x), the weights from the formula."""
    output = F.scaled_dot_product_attention(x, x, x)  # (B, L, D), scale 1/sqrt(D)
    weights = (x @ x.transpose(-2, -1) / math.sqrt(x.size(-1))).softmax(-1)  # (B, L, L)
    return dict(output=output, weights=weights)


def _attention_mistakes(x: torch.Tensor) -> dict[str, Mistake]:
    """Outputs of known buggy simple_self_attention, on the CPU float64 input x (B, L, D)."""
    L, D = x.size(-2), x.size(-1)
    qk = x @ x.transpose(-2, -1)  # (B, L, L)
    scores = qk / math.sqrt(D)
    right = scores.softmax(-1)
    found: dict[str, Mistake] = {}

    def add(name: str, hint: str, weights: torch.Tensor | None, output: torch.Tensor | None = None):
        if output is None and weights is not None:
            output = weights @ x
        found[name] = Mistake(hint, dict(output=output, weights=weights))

    add("no scale", "Your weights are softmax(x xᵀ) without the scaling: divide the scores by sqrt(D) before "
        "the softmax.", qk.softmax(-1))
    add("1/D", "Your scores are divided by D: divide them by sqrt(D).", (qk / D).softmax(-1))
    add("times sqrt(D)", "Your scores are multiplied by sqrt(D): divide them by sqrt(D).",
        (qk * math.sqrt(D)).softmax(-1))
    if L != D:
        add("sqrt(L)", "Your scores are divided by sqrt(L), the number of tokens: D is the number of "
            "features, x.size(-1).", (qk / math.sqrt(L)).softmax(-1))
    add("softmax over queries", "Your weights are normalised over the wrong axis (columns sum to 1): the "
        "softmax runs over the last dim, so that every row of the weights sums to 1.", scores.softmax(-2))
    add("softmax over batch", "Your softmax runs over dim 0, the batch (a softmax without dim= picks dim 0 "
        "for a 3-D tensor): pass dim=-1 so that every row of the weights sums to 1.", scores.softmax(0))
    add("weights transposed", "Your weights are transposed: row i holds the weights of token i over all "
        "tokens, and output = weights @ x.", right.transpose(-2, -1))
    found["output from transposed weights"] = Mistake(
        "Your output is weightsᵀ @ x: output = weights @ x, so that row i mixes the tokens with the weights "
        "of row i.", dict(output=right.transpose(-2, -1) @ x))
    found["weights before softmax"] = Mistake(
        "The weights you return are the scores before the softmax: return softmax(x xᵀ / sqrt(D)) "
        "(every row sums to 1).", dict(weights=scores))
    found["output from scores"] = Mistake(
        "Your output mixes x with the scores: output = weights @ x, with the weights after the softmax.",
        dict(output=scores @ x))
    found.update(swapped_outputs(dict(output=right @ x, weights=right)))
    return found



ANSWERS = {
    "attention_scores": Answer(lambda x, spec: dict(scores=x.args["x"] @ x.args["x"].transpose(-2, -1)),
                               lambda x, spec, expected: _scores_mistakes(x.args["x"])),
    "simple_self_attention": Answer(lambda x, spec: self_attention_reference(x.args["x"]),
                                    lambda x, spec, expected: _attention_mistakes(x.args["x"])),
}
