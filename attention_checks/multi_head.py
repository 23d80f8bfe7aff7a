"""Checks for assignment 04-multi-head: split_heads, merge_heads, MultiHeadAttention,
mha_parameter_count and mha_multiply_adds (inputs only; they are judged by
attention_checks.answers.multi_head).

A case is a small dict; every key is optional:

    split_heads:        batch=2, L=5, E=8, H=2, dtype="float32", seed
    merge_heads:        batch=2, H=2, L=5, head_dim=4, dtype="float32", seed
    MultiHeadAttention: batch=2, L=5, S=None (None: self-attention, query = key = value; a number:
                        separate key and value of length S), E=8, H=2, bias=True, dtype="float32",
                        key_padding_mask="none" | "bool" | "float",
                        attn_mask="none" | "bool" | "float", mask_per_head=False (attn_mask
                        (batch·H, L, S) instead of (L, S)), need_weights=True,
                        average_attn_weights=True, check="forward" | "parameters", seed
    mha_parameter_count: embed_dim=16, num_heads=4, bias=True
    mha_multiply_adds:   n=4, d=8, num_heads=2

Assignment 04 grades MultiHeadAttention without masks; its mask cases are graded in 05-masks (part 5),
whose notebook imports check_multi_head_attention from here, once chapter 05 has taught them.

Without a seed, one is derived from the case. MultiHeadAttention is built (with the global RNG
forked, so that the student's own random state is left as it was), given random weights (biases
included) through load_state_dict, put in eval mode and called; attention_checks.answers.multi_head
judges the outputs against nn.MultiheadAttention(E, H, bias=bias, batch_first=True).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import handle_torch_function, has_torch_function_unary

from .cases import Inputs
from .core import as_dtype, describe, randn
from .inputs import block_mask
from .modules import build_student_module, load_student_module
from .record import plain_number
from .localise import MORE_THAN_ONE_TOKEN, axis, ladder
from .registry import Check, declare

NEG_INF = float("-inf")


# --------------------------------------------------------------------------
# what MultiHeadAttention must not use


def _nn_multihead_attention_module(x: torch.Tensor) -> torch.Tensor:
    """Stands for an nn.MultiheadAttention inside the student's module. Called, on the
    forbidden-call guard's watch, when the student's object is or contains one, so that the
    guard reports it like a forbidden call."""
    if has_torch_function_unary(x):
        return handle_torch_function(_nn_multihead_attention_module, (x,), x)
    return x


_NATIVE_OPS = ("_native_multi_head_attention", "_transform_bias_rescale_qkv")
FORBIDDEN_MHA = {
    F.multi_head_attention_forward: "F.multi_head_attention_forward",  # torch.nn.functional.*, any alias
    _nn_multihead_attention_module: "nn.MultiheadAttention",  # an instance or subclass in the module
    nn.MultiheadAttention: "nn.MultiheadAttention",  # its methods, borrowed by any class
    # the fast path of nn.MultiheadAttention and the op only it uses: torch.* and torch.ops.aten.*
    **{getattr(torch, op): "nn.MultiheadAttention" for op in _NATIVE_OPS if hasattr(torch, op)},
    **{f"aten::{op}": "nn.MultiheadAttention" for op in _NATIVE_OPS},
}


def _flag_nn_multihead_attention(module: Any, x: torch.Tensor) -> None:
    modules = module.modules() if isinstance(module, nn.Module) else ()
    if any(isinstance(m, nn.MultiheadAttention) for m in modules):
        _nn_multihead_attention_module(x)


# --------------------------------------------------------------------------
# split_heads and merge_heads


def _split_inputs(c: dict[str, Any], gen: torch.Generator) -> Inputs:
    B, L, E, H = c["batch"], c["L"], c["E"], c["H"]
    if E % H:
        raise ValueError(f"E={E} is not divisible by H={H}")
    return Inputs(dict(x=randn(B, L, E, gen=gen, dtype=as_dtype(c["dtype"])), num_heads=H))  # x (B, L, E)


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
SPLIT_AXES = ladder(
    dict(batch=1, L=2, E=4, H=2, dtype="float64"),
    axis("2 heads", "how the features are cut into heads", (dict(H=1), "one head"), downward=True),
    axis("2 heads", "how the features are cut into heads: consecutive blocks of E/H, then (B, H, L, E/H)", (dict(E=8, H=4), "4 heads")),
    axis("2 positions", "where the positions go (after the heads)", (dict(L=3), "3 positions")),
    axis("a batch of one", "how the batch is kept apart", (dict(batch=2), "a batch of 2")),
)

check_split_heads = declare(Check(
    name="split_heads", assignment="04-multi-head",
    axes=SPLIT_AXES,
    defaults=dict(batch=2, L=5, E=8, H=2, dtype="float32"),
    inputs=_split_inputs, outputs=("heads",),
))


def _merge_inputs(c: dict[str, Any], gen: torch.Generator) -> Inputs:
    x = randn(c["batch"], c["H"], c["L"], c["head_dim"], gen=gen, dtype=as_dtype(c["dtype"]))  # (B, H, L, D)
    return Inputs(dict(x=x))


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
MERGE_AXES = ladder(
    dict(batch=1, H=2, L=2, head_dim=2, dtype="float64"),
    axis("2 heads", "how the heads are put side by side", (dict(H=1), "one head"), downward=True),
    axis("2 heads", "how the heads are put side by side: transpose to (B, L, H, head_dim), then merge the last two", (dict(H=3), "3 heads")),
    axis("2 positions", "where the positions go (before the features)", (dict(L=3), "3 positions")),
    axis("a batch of one", "how the batch is kept apart", (dict(batch=2), "a batch of 2")),
)

check_merge_heads = declare(Check(
    name="merge_heads", assignment="04-multi-head",
    axes=MERGE_AXES,
    defaults=dict(batch=2, H=2, L=5, head_dim=4, dtype="float32"),
    inputs=_merge_inputs, outputs=("merged",),
))


# --------------------------------------------------------------------------
# MultiHeadAttention


def _mha_inputs(c: dict[str, Any], gen: torch.Generator) -> Inputs:
    _refuse_mha_case(c)
    if c["check"] == "parameters":  # names and shapes only: nothing to pass
        return Inputs({})
    dtype, B, L, E = as_dtype(c["dtype"]), c["batch"], c["L"], c["E"]
    # drawn from gen in this order (tensors, weights, masks): a case's inputs never change
    self_attention = c["S"] is None
    S = L if self_attention else c["S"]
    query = randn(B, L, E, gen=gen, dtype=dtype)  # (B, L, E)
    key = query if self_attention else randn(B, S, E, gen=gen, dtype=dtype)  # (B, S, E)
    value = query if self_attention else randn(B, S, E, gen=gen, dtype=dtype)  # (B, S, E)
    state = _mha_state(E, c["bias"], gen, dtype)
    kwargs = _mha_masks(c, L, S, gen, dtype)  # only what the case sets, by nn.MultiheadAttention's names
    kwargs.update({name: False for name in ("need_weights", "average_attn_weights") if not c[name]})
    return Inputs(dict(query=query, key=key, value=value), kwargs, extra=dict(state=state))


def _refuse_mha_case(c: dict[str, Any]) -> None:
    """A case nn.MultiheadAttention could not answer, or this check cannot build: ValueError."""
    if c["E"] % c["H"]:
        raise ValueError(f"E={c['E']} is not divisible by H={c['H']}")
    kinds = {c["key_padding_mask"], c["attn_mask"]} - {"none"}
    if kinds - {"bool", "float"}:
        raise ValueError("masks are 'none', 'bool' or 'float'")
    if len(kinds) > 1:
        raise ValueError("nn.MultiheadAttention deprecates a bool mask with a float one: use one kind")
    if c["check"] not in ("forward", "parameters"):
        raise ValueError("check is 'forward' or 'parameters'")


def _mha_state(E: int, bias: bool, gen: torch.Generator, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The weights loaded into the student's module, by nn.MultiheadAttention's names: they keep
    q, k, v and the output of order 1, and the biases are nonzero so that ignoring them shows."""
    std = E**-0.5
    state = {"in_proj_weight": randn(3 * E, E, gen=gen, dtype=dtype, std=std)}
    if bias:
        state["in_proj_bias"] = randn(3 * E, gen=gen, dtype=dtype, std=0.5)
    state["out_proj.weight"] = randn(E, E, gen=gen, dtype=dtype, std=std)
    if bias:
        state["out_proj.bias"] = randn(E, gen=gen, dtype=dtype, std=0.5)
    return state


def _mha_masks(c: dict[str, Any], L: int, S: int, gen: torch.Generator, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The case's key_padding_mask and attn_mask, those it asks for: where each blocks is drawn
    first (attn_mask's, then the padding's), then their float values in the same order."""
    B, H = c["batch"], c["H"]
    am_shape = (B * H, L, S) if c["mask_per_head"] else (L, S)
    attn_blocked = block_mask(am_shape, gen) if c["attn_mask"] != "none" else None
    pad = block_mask((B, S), gen) if c["key_padding_mask"] != "none" else None
    if attn_blocked is not None and pad is not None:
        per_head = attn_blocked.view(-1, H, L, S) if c["mask_per_head"] else attn_blocked.expand(B, H, L, S)
        _keep_a_key_for_each_query(per_head, pad)
    attn_mask = None if attn_blocked is None else _as_mask(attn_blocked, c["attn_mask"], gen, dtype)
    padding = None if pad is None else _as_mask(pad, c["key_padding_mask"], gen, dtype)
    return {name: mask for name, mask in (("key_padding_mask", padding), ("attn_mask", attn_mask)) if mask is not None}


def _keep_a_key_for_each_query(per_head: torch.Tensor, pad: torch.Tensor) -> None:
    """No query may lose all its keys (its row of weights would be NaN): where the two masks
    together block every key of a query (``per_head``: the attn_mask as (B, H, L, S)), the
    padding lets the first key through that the attn_mask leaves open."""
    for b, h, i in (per_head | pad[:, None, None, :]).all(-1).nonzero().tolist():
        pad[b, (~per_head[b, h, i]).nonzero()[0, 0]] = False


def _as_mask(blocked: torch.Tensor, kind: str, gen: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    """A mask of ``kind`` ("bool": True where blocked; "float": -inf where blocked, and other
    values to add, drawn from ``gen``, elsewhere)."""
    if kind == "bool":
        return blocked
    return torch.where(blocked, NEG_INF, randn(*blocked.shape, gen=gen, dtype=torch.float64)).to(dtype)


PARAMETER_NAMES = "in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias"


def _mha_call(cls: Any, x: Inputs, c: dict[str, Any]) -> Any:
    """Build the student's module, load the case's weights, call it in eval mode."""
    module = build_student_module(cls, (c["E"], c["H"]), dict(bias=c["bias"]))
    _flag_nn_multihead_attention(module, x.like if x.like is not None else torch.zeros(()))
    if c["check"] == "parameters":
        return tuple(sorted(f"{n} {tuple(p.shape)}" for n, p in module.named_parameters()))
    module = load_student_module(module, x.extra["state"], "MultiHeadAttention", PARAMETER_NAMES)
    with torch.no_grad():
        result = module(*x.args.values(), **x.kwargs)
    if not c["need_weights"] and isinstance(result, (tuple, list)) and len(result) == 2:
        result = (result[0], result[1] is None)  # judged as "attn_weights is None"
    return result


def _mha_describe(x: Inputs, c: dict[str, Any]) -> str:
    title = f"MultiHeadAttention({c['E']}, {c['H']}{'' if c['bias'] else ', bias=False'})"
    if c["check"] == "parameters":
        return f"{title}: parameter names and shapes"
    named = dict(x.named)
    if c["S"] is None:  # self-attention: one tensor
        named = {"query = key = value": named.pop("query"),
                 **{n: v for n, v in named.items() if n not in ("key", "value")}}
    return f"{title}; {describe(named, like=x.like, with_dtype=['key_padding_mask', 'attn_mask'])}"


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
MHA_AXES = ladder(
    dict(batch=1, L=2, E=4, H=2, dtype="float64"),
    axis("2 heads", "how the heads are split, attended and merged", (dict(H=1), "one head"), downward=True),
    axis("2 positions", MORE_THAN_ONE_TOKEN, (dict(L=1), "one position (its weight is 1)"), downward=True),
    axis("self-attention (query = key = value)", "which input each projection takes (query, key, value)",
         (dict(S=3), "separate keys and values of length 3")),
    axis("biases", "the biases", (dict(bias=False), "bias=False"), downward=True),
    axis("weights averaged over heads", "the weights per head", (dict(average_attn_weights=False), "weights per head")),
    axis("a batch of one", "how the batch is kept apart from the heads", (dict(batch=2), "a batch of 2")),
    steps=(("out_proj", "the output projection"),),
)

check_multi_head_attention = declare(Check(
    name="MultiHeadAttention", assignment="04-multi-head",
    axes=MHA_AXES,
    defaults=dict(batch=2, L=5, S=None, E=8, H=2, bias=True, dtype="float32", key_padding_mask="none",
                  attn_mask="none", mask_per_head=False, need_weights=True, average_attn_weights=True,
                  check="forward"),
    inputs=_mha_inputs, outputs=("attn_output", "attn_weights"), call=_mha_call, describe=_mha_describe,
    forbidden=FORBIDDEN_MHA, kind="class",
))


# --------------------------------------------------------------------------
# parameter count and cost


def _count_inputs(c: dict[str, Any], gen: torch.Generator) -> Inputs:
    if c["embed_dim"] % c["num_heads"]:
        raise ValueError(f"embed_dim={c['embed_dim']} is not divisible by num_heads={c['num_heads']}")
    return Inputs(dict(embed_dim=c["embed_dim"], num_heads=c["num_heads"]), dict(bias=c["bias"]))


def _cost_inputs(c: dict[str, Any], gen: torch.Generator) -> Inputs:
    if c["d"] % c["num_heads"]:
        raise ValueError(f"d={c['d']} is not divisible by num_heads={c['num_heads']}")
    return Inputs(dict(n=c["n"], d=c["d"], num_heads=c["num_heads"]))


def _call_for_number(fn: Any, x: Inputs, c: dict[str, Any]) -> Any:
    return plain_number(fn(*x.args.values(), **x.kwargs))


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
COUNT_AXES = ladder(
    dict(embed_dim=4, num_heads=1, bias=False),
    axis("no biases", "the biases (of the input and the output projections)", (dict(bias=True), "bias=True")),
    axis("one head", "what depends on the heads (nothing: the projections are embed_dim wide)", (dict(num_heads=2), "2 heads")),
    axis("embed_dim 4", "the four embed_dim x embed_dim matrices", (dict(embed_dim=8), "embed_dim 8")),
)

check_mha_parameter_count = declare(Check(
    name="mha_parameter_count", assignment="04-multi-head",
    axes=COUNT_AXES,
    defaults=dict(embed_dim=16, num_heads=4, bias=True),
    inputs=_count_inputs, outputs=("count",), call=_call_for_number, on_device=False,
))

# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
COST_AXES = ladder(
    dict(n=1, d=2, num_heads=1),
    axis("one token", "the pairs of tokens (n^2 scores and weighted sums)", (dict(n=3), "3 tokens")),
    axis("d=2", "the projections (n d^2 each) and the scores' width", (dict(d=4), "d=4")),
    axis("one head", "what depends on the heads (each head's scores are d/h wide)", (dict(d=4, num_heads=2), "2 heads of width 2")),
)

check_mha_multiply_adds = declare(Check(
    name="mha_multiply_adds", assignment="04-multi-head",
    axes=COST_AXES,
    defaults=dict(n=4, d=8, num_heads=2),
    inputs=_cost_inputs, outputs=("multiply_adds",), call=_call_for_number, on_device=False,
))
