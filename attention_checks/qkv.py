"""Checks for assignment 03-qkv: project_qkv and scaled_dot_product_attention.

A case is a small dict; every key is optional:

    project_qkv:  batch=(2,), L=5, d_model=8, d_k=4, d_v=d_k, dtype="float32", seed
    scaled_dot_product_attention:
                  batch=(2,), L=5, S=L, E=8, Ev=E, dtype="float32",
                  mask="none" | "bool" | "float", broadcast_mask=False (mask (L, S) instead of (*batch, L, S)),
                  is_causal=False, scale=None, seed

`batch` holds the leading dims, e.g. (1,) or (2, 3). Without a seed, one is derived from the case.
"""

from __future__ import annotations

import math
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

# The API scaled_dot_product_attention mirrors, under every name it can be reached by.
FORBIDDEN_SDPA = {
    F.scaled_dot_product_attention: "F.scaled_dot_product_attention",  # is torch._C._nn.scaled_dot_product_attention
    **{
        f"aten::{op}": "F.scaled_dot_product_attention"
        for op in (
            "scaled_dot_product_attention",
            "_scaled_dot_product_attention_math",
            "_scaled_dot_product_attention_math_for_mps",
            "_scaled_dot_product_flash_attention",
            "_scaled_dot_product_flash_attention_for_cpu",
            "_scaled_dot_product_efficient_attention",
            "_scaled_dot_product_cudnn_attention",
            "_scaled_dot_product_fused_attention_overrideable",
        )
    },
}


# --------------------------------------------------------------------------
# project_qkv

PROJECT_DEFAULTS = dict(batch=(2,), L=5, d_model=8, d_k=4, d_v=None, dtype="float32")


@built_once_in_grader
def _project_case(spec: Mapping[str, Any], device: torch.device) -> Case:
    c = with_defaults(spec, PROJECT_DEFAULTS)
    dtype, d_model, d_k = as_dtype(c["dtype"]), c["d_model"], c["d_k"]
    d_v = c["d_v"] or d_k
    gen = generator(case_seed(spec, "project_qkv"))
    x = randn(*c["batch"], c["L"], d_model, gen=gen, dtype=dtype)  # (*batch, L, d_model)
    std = d_model**-0.5  # keeps q, k, v of order 1
    w_q = randn(d_model, d_k, gen=gen, dtype=dtype, std=std)  # (d_model, d_k)
    w_k = randn(d_model, d_k, gen=gen, dtype=dtype, std=std)  # (d_model, d_k)
    w_v = randn(d_model, d_v, gen=gen, dtype=dtype, std=std)  # (d_model, d_v)

    x64 = reference(x)
    w64 = dict(w_q=reference(w_q), w_k=reference(w_k), w_v=reference(w_v))
    expected = dict(q=x64 @ w64["w_q"], k=x64 @ w64["w_k"], v=x64 @ w64["w_v"])

    def mistakes() -> dict[str, Mistake]:
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

    args = [t.to(device) for t in (x, w_q, w_k, w_v)]
    return Case(
        inputs=describe(dict(x=args[0], w_q=args[1], w_k=args[2], w_v=args[3]), like=args[0]),
        run=lambda fn: fn(*args),
        expected=expected,
        like=args[0],
        mistakes=mistakes,
    )


def check_project_qkv(
    fn: Callable, *, points: float, cases: Sequence[Mapping[str, Any]], device: torch.device | None = None
):
    """Check project_qkv(x, w_q, w_k, w_v) -> (q, k, v); see the module docstring for the cases."""
    __tracebackhide__ = True
    device = device or pick_device()
    return run_check("project_qkv", fn, [_project_case(c, device) for c in cases], points=points)


# --------------------------------------------------------------------------
# scaled_dot_product_attention

SDPA_DEFAULTS = dict(
    batch=(2,), L=5, S=None, E=8, Ev=None, dtype="float32", mask="none", broadcast_mask=False, is_causal=False, scale=None
)


def _keep_mask(shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    """Random boolean mask, True = may attend. Every row keeps a key and masks a key,
    so that neither the mask nor its inverse hides a whole row (untested behaviour)."""
    *rows, S = shape
    assert S >= 2, "masks need at least 2 keys"
    keep = torch.rand(shape, generator=gen, dtype=torch.float64) < 0.6
    first = torch.randint(S, (*rows, 1), generator=gen)
    other = (first + torch.randint(1, S, (*rows, 1), generator=gen)) % S  # a different key of the same row
    return keep.scatter(-1, first, True).scatter(-1, other, False)


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


def _sdpa_mistakes(q, k, v, attn_mask, is_causal, scale) -> dict[str, Mistake]:
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
            "q kᵀ · scale instead of q kᵀ / sqrt(d_k).", _attend(_masked(qk / math.sqrt(E), mask), v))
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


@built_once_in_grader
def _sdpa_case(spec: Mapping[str, Any], device: torch.device) -> Case:
    c = with_defaults(spec, SDPA_DEFAULTS)
    dtype, batch, L, E = as_dtype(c["dtype"]), tuple(c["batch"]), c["L"], c["E"]
    S, Ev = c["S"] or L, c["Ev"] or E
    if c["mask"] != "none" and c["is_causal"]:
        raise ValueError("F.scaled_dot_product_attention takes attn_mask or is_causal=True, not both")
    gen = generator(case_seed(spec, "scaled_dot_product_attention"))
    query = randn(*batch, L, E, gen=gen, dtype=dtype)  # (*batch, L, E)
    key = randn(*batch, S, E, gen=gen, dtype=dtype)  # (*batch, S, E)
    value = randn(*batch, S, Ev, gen=gen, dtype=dtype)  # (*batch, S, Ev)
    mask_shape = (L, S) if c["broadcast_mask"] else (*batch, L, S)
    attn_mask = None
    if c["mask"] == "bool":
        attn_mask = _keep_mask(mask_shape, gen)
    elif c["mask"] == "float":  # any added values, -inf included
        attn_mask = torch.where(_keep_mask(mask_shape, gen), randn(*mask_shape, gen=gen, dtype=torch.float64), NEG_INF)
        attn_mask = attn_mask.to(dtype)
    elif c["mask"] != "none":
        raise ValueError(f"mask must be 'none', 'bool' or 'float', not {c['mask']!r}")

    kwargs: dict[str, Any] = {}  # only the arguments the case sets, by F.sdpa's names
    if attn_mask is not None:
        kwargs["attn_mask"] = attn_mask
    if c["is_causal"]:
        kwargs["is_causal"] = True
    if c["scale"] is not None:
        kwargs["scale"] = c["scale"]

    q64, k64, v64 = reference(query), reference(key), reference(value)
    m64 = None
    if attn_mask is not None:  # a boolean mask stays boolean
        m64 = reference(attn_mask, torch.bool if attn_mask.dtype == torch.bool else torch.float64)
    expected = attention_reference(q64, k64, v64, m64, c["is_causal"], c["scale"])

    args = [t.to(device) for t in (query, key, value)]
    kwargs = {name: a.to(device) if isinstance(a, torch.Tensor) else a for name, a in kwargs.items()}
    return Case(
        inputs=describe(dict(query=args[0], key=args[1], value=args[2], **kwargs), like=args[0], with_dtype=["attn_mask"]),
        run=lambda fn: fn(*args, **kwargs),
        expected=expected,
        like=args[0],
        mistakes=lambda: _sdpa_mistakes(q64, k64, v64, m64, c["is_causal"], c["scale"]),
    )


def check_scaled_dot_product_attention(
    fn: Callable, *, points: float, cases: Sequence[Mapping[str, Any]], device: torch.device | None = None
):
    """Check scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None)
    -> (output, weights) against F.scaled_dot_product_attention; calling that function earns 0."""
    __tracebackhide__ = True
    device = device or pick_device()
    return run_check(
        "scaled_dot_product_attention",
        fn,
        [_sdpa_case(c, device) for c in cases],
        points=points,
        forbidden=FORBIDDEN_SDPA,
    )
