"""Checks for assignment 03-qkv: project_qkv and scaled_dot_product_attention (inputs only;
they are judged by attention_checks.answers.qkv).

A case is a small dict; every key is optional:

    project_qkv:  batch=(2,), L=5, d_model=8, d_k=4, d_v=d_k, dtype="float32", seed
    scaled_dot_product_attention:
                  batch=(2,), L=5, S=L, E=8, Ev=E, dtype="float32",
                  mask="none" | "bool" | "float", broadcast_mask=False (mask (L, S) instead of (*batch, L, S)),
                  is_causal=False, scale=None, seed

`batch` holds the leading dims, e.g. (1,) or (2, 3). Without a seed, one is derived from the case.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .cases import Inputs
from .core import as_dtype, randn
from .inputs import keep_mask
from .localise import axis, ladder
from .registry import Check, declare

NEG_INF = float("-inf")

# PyTorch's fused attention operators, each the same computation (some return the attention weights
# too): forbidden by operator, under torch.* and torch.ops.aten.*, wherever this torch has them.
_FUSED_ATTENTION = ("_native_multi_head_attention", "_native_decoder_only_multi_head_attention",
                    "_transformer_encoder_layer_fwd", "_transformer_decoder_only_layer_fwd",
                    "_efficient_attention_forward", "_flash_attention_forward",
                    "_flash_attention_forward_no_dropout_inplace", "_cudnn_attention_forward",
                    "_triton_scaled_dot_attention", "_triton_multi_head_attention")
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
    **{getattr(torch, op): f"torch.{op}" for op in _FUSED_ATTENTION if hasattr(torch, op)},
    **{f"aten::{op}": f"torch.{op}" for op in _FUSED_ATTENTION},
}


def _project_inputs(c: dict[str, Any], gen: torch.Generator) -> Inputs:
    dtype, d_model, d_k = as_dtype(c["dtype"]), c["d_model"], c["d_k"]
    d_v = c["d_v"] or d_k
    x = randn(*c["batch"], c["L"], d_model, gen=gen, dtype=dtype)  # (*batch, L, d_model)
    std = d_model**-0.5  # keeps q, k, v of order 1
    w_q = randn(d_model, d_k, gen=gen, dtype=dtype, std=std)  # (d_model, d_k)
    w_k = randn(d_model, d_k, gen=gen, dtype=dtype, std=std)  # (d_model, d_k)
    w_v = randn(d_model, d_v, gen=gen, dtype=dtype, std=std)  # (d_model, d_v)
    return Inputs(dict(x=x, w_q=w_q, w_k=w_k, w_v=w_v))


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
PROJECT_AXES = ladder(
    dict(batch=(1,), L=2, d_model=3, d_k=2, dtype="float64"),
    axis("d_v = d_k", "the value projection (its width d_v)", (dict(d_v=3), "d_v=3, d_k=2")),
    axis("one leading dim", "how the leading dims are kept apart", (dict(batch=(2, 3)), "leading dims (2, 3)")),
    axis("2 tokens", "the axis you project along (the last one)", (dict(L=4), "4 tokens")),
)

check_project_qkv = declare(Check(
    name="project_qkv", assignment="03-qkv",
    axes=PROJECT_AXES,
    defaults=dict(batch=(2,), L=5, d_model=8, d_k=4, d_v=None, dtype="float32"),
    inputs=_project_inputs, outputs=("q", "k", "v"),
))


def _sdpa_inputs(c: dict[str, Any], gen: torch.Generator) -> Inputs:
    dtype, batch, L, E = as_dtype(c["dtype"]), tuple(c["batch"]), c["L"], c["E"]
    S, Ev = c["S"] or L, c["Ev"] or E
    if c["mask"] != "none" and c["is_causal"]:
        raise ValueError("F.scaled_dot_product_attention takes attn_mask or is_causal=True, not both")
    query = randn(*batch, L, E, gen=gen, dtype=dtype)  # (*batch, L, E)
    key = randn(*batch, S, E, gen=gen, dtype=dtype)  # (*batch, S, E)
    value = randn(*batch, S, Ev, gen=gen, dtype=dtype)  # (*batch, S, Ev)
    mask_shape = (L, S) if c["broadcast_mask"] else (*batch, L, S)
    kwargs: dict[str, Any] = {}  # only the arguments the case sets, by F.sdpa's names
    if c["mask"] == "bool":
        kwargs["attn_mask"] = keep_mask(mask_shape, gen)
    elif c["mask"] == "float":  # any added values, -inf included
        keep = keep_mask(mask_shape, gen)
        kwargs["attn_mask"] = torch.where(keep, randn(*mask_shape, gen=gen, dtype=torch.float64), NEG_INF).to(dtype)
    elif c["mask"] != "none":
        raise ValueError(f"mask must be 'none', 'bool' or 'float', not {c['mask']!r}")
    if c["is_causal"]:
        kwargs["is_causal"] = True
    if c["scale"] is not None:
        kwargs["scale"] = c["scale"]
    return Inputs(dict(query=query, key=key, value=value), kwargs)


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
SDPA_AXES = ladder(
    dict(batch=(1,), L=2, E=2, dtype="float64"),
    axis("as many keys as queries", "which axes you transpose (the keys' length S is the last axis of the scores)",
         (dict(S=3), "3 keys for 2 queries")),
    axis("values as wide as keys", "the values' width Ev", (dict(Ev=3), "values of width 3")),
    axis("no mask", "how a boolean mask is applied (True = may attend)", (dict(L=3, mask="bool"), "a boolean mask"),
         (dict(L=3, mask="bool", broadcast_mask=True), "a boolean mask (L, S) broadcast over the batch")),
    axis("no mask", "how a float mask is applied (added to the scores)", (dict(L=3, mask="float"), "a float mask")),
    axis("is_causal=False", "the causal mask (query i sees keys 0..i)", (dict(is_causal=True), "is_causal=True"),
         (dict(is_causal=True, L=3, S=5), "is_causal=True with L=3 < S=5")),
    axis("the default scale", "where `scale` replaces 1/sqrt(E)", (dict(scale=0.3), "scale=0.3")),
    axis("one leading dim", "how the leading dims are kept apart", (dict(batch=(2, 3)), "leading dims (2, 3)")),
)

check_scaled_dot_product_attention = declare(Check(
    name="scaled_dot_product_attention", assignment="03-qkv",
    axes=SDPA_AXES,
    defaults=dict(batch=(2,), L=5, S=None, E=8, Ev=None, dtype="float32", mask="none", broadcast_mask=False,
                  is_causal=False, scale=None),
    inputs=_sdpa_inputs, outputs=("output", "weights"), forbidden=FORBIDDEN_SDPA,
))
