"""How 03-qkv is judged: references and known mistakes of project_qkv and
scaled_dot_product_attention, on float64 CPU inputs."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..cases import Inputs, Spec
from .catalogue import Answer, Mistake

NEG_INF = float("-inf")


def _project_reference(x: Inputs, spec: Spec) -> dict[str, torch.Tensor]:
    x64 = x.args["x"]
    return dict(q=x64 @ x.args["w_q"], k=x64 @ x.args["w_k"], v=x64 @ x.args["w_v"])


def _project_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    x64, w64 = x.args["x"], {k: x.args[k] for k in ("w_q", "w_k", "w_v")}
    found = {
        "same weight": Mistake(
            "k and v both equal x @ w_q: each of q, k, v has its own weight (k = x @ w_k, v = x @ w_v).",
            dict(k=x64 @ w64["w_q"], v=x64 @ w64["w_q"]),
        )
    }
    for out, own in (("q", "w_q"), ("k", "w_k"), ("v", "w_v")):
        for other, w in w64.items():
            if other != own:
                found[f"{out} from {other}"] = Mistake(
                    f"{out} equals x @ {other}: return (q, k, v) in this order, with {out} = x @ {own}.",
                    {out: x64 @ w},
                )
        if w64[own].size(0) == w64[own].size(1):  # x @ w.T only runs when the weight is square
            found[f"{out} transposed"] = Mistake(
                f"{out} equals x @ {own}ᵀ: the weights are stored (d_model, d_k), so {out} = x @ {own} "
                "with no transpose (unlike nn.Linear's weight).",
                {out: x64 @ w64[own].T},
            )
    return found


def _masked(scores: torch.Tensor, mask: torch.Tensor | None, fill: float = NEG_INF) -> torch.Tensor:
    # F.sdpa semantics: boolean True = may attend, a float mask is added
    if mask is None:
        return scores
    if mask.dtype == torch.bool:
        return scores.masked_fill(~mask, fill)
    return scores + mask


def _attend(scores: torch.Tensor, value: torch.Tensor, dim: int = -1) -> dict[str, torch.Tensor]:
    weights = scores.softmax(dim)  # (..., L, S)
    return dict(output=weights @ value, weights=weights)  # (..., L, Ev), (..., L, S)


def attention_reference(query, key, value, attn_mask=None, is_causal=False, scale=None) -> dict[str, torch.Tensor]:
    """CPU float64 reference: output from PyTorch itself, weights from the formula."""
    output = F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale)
    L, S, E = query.size(-2), key.size(-2), query.size(-1)
    mask = torch.ones(L, S, dtype=torch.bool).tril() if is_causal else attn_mask
    scale = 1 / math.sqrt(E) if scale is None else scale
    weights = _attend(_masked(query @ key.transpose(-2, -1) * scale, mask), value)["weights"]
    return dict(output=output, weights=weights)


def sdpa_mistakes(q, k, v, attn_mask, is_causal, scale) -> dict[str, Mistake]:
    """The outputs of known buggy implementations, all on CPU float64 inputs."""
    L, S, E = q.size(-2), k.size(-2), q.size(-1)
    causal = torch.ones(L, S, dtype=torch.bool).tril()  # top-left aligned, as F.sdpa
    mask = causal if is_causal else attn_mask
    s = 1 / math.sqrt(E) if scale is None else scale
    qk = q @ k.transpose(-2, -1)  # (..., L, S)
    scores = qk * s
    right = _attend(_masked(scores, mask), v)
    found: dict[str, Mistake] = {}

    def add(name: str, hint: str, outputs: dict[str, torch.Tensor | None]):
        found[name] = Mistake(hint, outputs)

    if scale is None:
        add("no scale", "Your scores differ by a factor sqrt(d_k): is the 1/sqrt(d_k) scaling missing?",
            _attend(_masked(qk, mask), v))
        add("1/d_k", "Your scores are divided by d_k: scale them by 1/sqrt(d_k).",
            _attend(_masked(qk / E, mask), v))
    else:
        add("scale ignored", "Your result ignores the `scale` argument: when it is given, the scores are "
            "q kᵀ · scale instead of q kᵀ / sqrt(d_k)" + (" (scale=0.0 is a value, not the default: test "
            "`scale is None`, not `not scale` or `scale or ...`)" if scale == 0 else "") + ".",
            _attend(_masked(qk / math.sqrt(E), mask), v))
        if scale:  # dividing by 0 gives no output to compare with
            add("divided by scale", "`scale` multiplies the scores (q kᵀ · scale); you seem to divide by it.",
                _attend(_masked(qk / scale, mask), v))
        add("no scale", "Your scores are not scaled: multiply q kᵀ by `scale` (1/sqrt(d_k) when scale is None).",
            _attend(_masked(qk, mask), v))
    add("softmax axis", "Your weights are normalised over the wrong axis: the softmax runs over the keys "
        "(the last dim), so that every row of the weights sums to 1.", _attend(_masked(scores, mask), v, dim=-2))

    if attn_mask is not None and attn_mask.dtype == torch.bool:
        add("mask inverted", "Your boolean mask is inverted: for F.scaled_dot_product_attention True means the "
            "query MAY attend that key (nn.MultiheadAttention uses the opposite convention).",
            _attend(_masked(scores, ~attn_mask), v))
        add("mask ignored", "Your result ignores attn_mask: mask the scores where attn_mask is False.",
            _attend(scores, v))
        add("mask filled with 0", "Masked scores must become -inf before the softmax (so their weight is 0), "
            "not 0.", _attend(_masked(scores, attn_mask, fill=0.0), v))
        weights = scores.softmax(-1) * attn_mask
        add("mask after softmax", "Mask the scores before the softmax: zeroing weights after it leaves rows "
            "that no longer sum to 1.", dict(output=weights @ v, weights=weights))
    elif attn_mask is not None:
        add("float mask ignored", "Your result ignores the float attn_mask: add it to the scores before the "
            "softmax.", _attend(scores, v))
        add("float mask before scaling", "Add the float mask after scaling: scores = q kᵀ · scale + attn_mask.",
            _attend((qk + attn_mask) * s, v))
    if is_causal:
        add("is_causal ignored", "Your result ignores is_causal=True: query i may only attend keys 0..i.",
            _attend(scores, v))
        ones = torch.ones(L, S, dtype=torch.bool)
        for diagonal in (0, 1):  # keeps the upper triangle, or masks the lower one
            add(f"causal flipped {diagonal}", "Your causal mask is flipped: query i may attend keys 0..i "
                "(the lower triangle, torch.tril), not the keys after it.",
                _attend(_masked(scores, ones.triu(diagonal)), v))
        add("causal without diagonal", "Query i may also attend key i itself: keep the diagonal "
            "(torch.ones(L, S).tril(), diagonal=0).", _attend(_masked(scores, causal.tril(-1)), v))
        if L != S:
            add("causal bottom-right", "F.scaled_dot_product_attention aligns the causal mask to the top left: "
                "query i attends keys 0..i even when L != S (torch.ones(L, S).tril()).",
                _attend(_masked(scores, ones.tril(S - L)), v))

    add("weights @ key", "Your output is weights @ key: the weights average the values, output = weights @ value.",
        dict(output=right["weights"] @ k))
    add("weights transposed", "Your weights are transposed: they are (..., L, S), one row per query.",
        dict(weights=right["weights"].transpose(-2, -1)))
    flipped_mask = None if mask is None else mask.transpose(-2, -1)
    flipped = (k @ q.transpose(-2, -1) * s)  # (..., S, L)
    flipped = _masked(flipped, flipped_mask).softmax(-1)
    add("key @ queryᵀ", "Your weights look like softmax(key @ queryᵀ): the scores are query @ keyᵀ, "
        "one row per query.", dict(weights=flipped, output=flipped @ v if L == S else None))
    add("weights before softmax", "The weights you return are the scores before the softmax: return the "
        "softmax of the scores (rows sum to 1).", dict(weights=_masked(scores, mask)))
    return found




def _sdpa_reference(x: Inputs, spec: Spec) -> dict[str, torch.Tensor]:
    return attention_reference(*x.args.values(), **x.kwargs)


def _sdpa_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    return sdpa_mistakes(*x.args.values(), x.kwargs.get("attn_mask"), spec["is_causal"], spec["scale"])


ANSWERS = {
    "project_qkv": Answer(_project_reference, _project_mistakes),
    "scaled_dot_product_attention": Answer(_sdpa_reference, _sdpa_mistakes),
}
