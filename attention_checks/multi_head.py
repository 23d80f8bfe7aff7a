"""Checks for assignment 04-multi-head: split_heads, merge_heads, MultiHeadAttention,
mha_parameter_count and mha_multiply_adds.

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

Without a seed, one is derived from the case. MultiHeadAttention is checked against
nn.MultiheadAttention(E, H, bias=bias, batch_first=True) in eval mode, with random weights
(biases included) that the student's module receives through load_state_dict.

Some expected values are plain Python values, compared exactly by core: the parameter names
and shapes (a tuple of strings), the counts (ints), and whether the weights are None (a bool,
reported as the output "attn_weights is None").
"""

from __future__ import annotations

import itertools
import math
import numbers
from typing import Any, Callable, Mapping, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import handle_torch_function, has_torch_function_unary

from . import core
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


# --------------------------------------------------------------------------
# plain values


def _plain_number(x: Any) -> Any:
    """A Python int for an integral number (numpy, 0-dim tensor, 1088.0), else x as it is."""
    try:
        if isinstance(x, torch.Tensor):
            if x.numel() != 1:
                return x
            x = x.item()
        if isinstance(x, bool) or not isinstance(x, numbers.Real):
            return x
        return int(x) if float(x).is_integer() else float(x)
    except Exception:
        return x


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

SPLIT_DEFAULTS = dict(batch=2, L=5, E=8, H=2, dtype="float32")
MERGE_DEFAULTS = dict(batch=2, H=2, L=5, head_dim=4, dtype="float32")


def split_reference(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    B, L, E = x.shape
    return x.reshape(B, L, num_heads, E // num_heads).transpose(1, 2)  # (B, H, L, E/H)


def merge_reference(x: torch.Tensor) -> torch.Tensor:
    B, H, L, D = x.shape
    return x.transpose(1, 2).reshape(B, L, H * D)  # (B, L, H·D)


@built_once_in_grader
def _split_case(spec: Mapping[str, Any], device: torch.device) -> Case:
    c = with_defaults(spec, SPLIT_DEFAULTS)
    dtype, B, L, E, H = as_dtype(c["dtype"]), c["batch"], c["L"], c["E"], c["H"]
    if E % H:
        raise ValueError(f"E={E} is not divisible by H={H}")
    D = E // H
    x = randn(B, L, E, gen=generator(case_seed(spec, "split_heads")), dtype=dtype)  # (B, L, E)
    x64 = reference(x)

    def mistakes() -> dict[str, Mistake]:
        return {
            "no transpose": Mistake(
                "Your heads look like x.reshape(B, H, L, E/H): a reshape alone cuts the sequence, not the "
                "features. Reshape to (B, L, H, E/H) first, then transpose the L and H dims.",
                dict(heads=x64.reshape(B, H, L, D))),
            "interleaved": Mistake(
                "Your head h takes the features h, h+H, h+2H, ...: head h must take the contiguous block "
                "of features h·E/H ... (h+1)·E/H - 1 (reshape to (B, L, H, E/H), not (B, L, E/H, H)).",
                dict(heads=x64.reshape(B, L, D, H).permute(0, 3, 1, 2))),
            "heads last": Mistake(
                "You return (B, L, H, E/H): move the heads before the length, (B, H, L, E/H) "
                "(transpose dims 1 and 2).", dict(heads=x64.reshape(B, L, H, D))),
            "batch times heads": Mistake(
                "You return (B·H, L, E/H): keep batch and heads as two dims, (B, H, L, E/H).",
                dict(heads=split_reference(x64, H).reshape(B * H, L, D))),
        }

    arg = x.to(device)
    return Case(
        inputs=describe(dict(x=arg, num_heads=H), like=arg),
        run=lambda fn: fn(arg, H),
        expected=dict(heads=split_reference(x64, H)),
        like=arg,
        mistakes=mistakes,
    )


@built_once_in_grader
def _merge_case(spec: Mapping[str, Any], device: torch.device) -> Case:
    c = with_defaults(spec, MERGE_DEFAULTS)
    dtype, B, H, L, D = as_dtype(c["dtype"]), c["batch"], c["H"], c["L"], c["head_dim"]
    x = randn(B, H, L, D, gen=generator(case_seed(spec, "merge_heads")), dtype=dtype)  # (B, H, L, D)
    x64 = reference(x)

    def mistakes() -> dict[str, Mistake]:
        return {
            "no transpose": Mistake(
                "Your result looks like x.reshape(B, L, H·D): a reshape alone mixes positions of the "
                "sequence. Transpose to (B, L, H, D) first, then reshape to (B, L, H·D).",
                dict(merged=x64.reshape(B, L, H * D))),
            "interleaved": Mistake(
                "Your features interleave the heads (h, h+H, ...): concatenate them, head 0's D features "
                "first, then head 1's, ... (transpose to (B, L, H, D), not (B, L, D, H)).",
                dict(merged=x64.permute(0, 2, 3, 1).reshape(B, L, H * D))),
            "averaged": Mistake(
                "You average the heads: merge_heads concatenates them, (B, L, H·D).",
                dict(merged=x64.mean(1))),
            "summed": Mistake(
                "You sum the heads: merge_heads concatenates them, (B, L, H·D).", dict(merged=x64.sum(1))),
        }

    arg = x.to(device)
    return Case(
        inputs=describe(dict(x=arg), like=arg),
        run=lambda fn: fn(arg),
        expected=dict(merged=merge_reference(x64)),
        like=arg,
        mistakes=mistakes,
    )


def check_split_heads(fn: Callable, *, points: float, cases: Sequence[Mapping[str, Any]],
                      device: torch.device | None = None):
    """Check split_heads(x, num_heads): (B, L, E) -> (B, H, L, E/H)."""
    __tracebackhide__ = True
    device = device or pick_device()
    return run_check("split_heads", fn, [_split_case(c, device) for c in cases], points=points)


def check_merge_heads(fn: Callable, *, points: float, cases: Sequence[Mapping[str, Any]],
                      device: torch.device | None = None):
    """Check merge_heads(x): (B, H, L, D) -> (B, L, H·D), the inverse of split_heads."""
    __tracebackhide__ = True
    device = device or pick_device()
    return run_check("merge_heads", fn, [_merge_case(c, device) for c in cases], points=points)


# --------------------------------------------------------------------------
# MultiHeadAttention

MHA_DEFAULTS = dict(
    batch=2, L=5, S=None, E=8, H=2, bias=True, dtype="float32", key_padding_mask="none", attn_mask="none",
    mask_per_head=False, need_weights=True, average_attn_weights=True, check="forward",
)


def _blocked(shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    """Random boolean mask, True = not allowed. Every row blocks a key and leaves one, so that
    neither the mask nor its inverse hides a whole row (untested behaviour)."""
    *rows, S = shape
    assert S >= 2, "masks need at least 2 keys"
    blocked = torch.rand(shape, generator=gen, dtype=torch.float64) < 0.4
    first = torch.randint(S, (*rows, 1), generator=gen)
    other = (first + torch.randint(1, S, (*rows, 1), generator=gen)) % S  # a different key of the same row
    return blocked.scatter(-1, first, False).scatter(-1, other, True)


def _torch_mha(E: int, H: int, bias: bool) -> nn.MultiheadAttention:
    # on the meta device: no memory, and the global RNG is left alone
    return nn.MultiheadAttention(E, H, bias=bias, batch_first=True, device="meta", dtype=torch.float64)


def mha_reference(params: Mapping[str, torch.Tensor], num_heads: int, query, key, value,
                  key_padding_mask=None, attn_mask=None, need_weights=True, average_attn_weights=True):
    """nn.MultiheadAttention(batch_first=True) in eval mode, on CPU float64 inputs."""
    E = query.size(-1)
    module = _torch_mha(E, num_heads, "in_proj_bias" in params)
    module.load_state_dict(dict(params), assign=True)
    module.eval()
    kwargs = dict(key_padding_mask=key_padding_mask, attn_mask=attn_mask, need_weights=need_weights,
                  average_attn_weights=average_attn_weights)
    with torch.enable_grad(), core.quiet():  # grad on: the documented slow path, not the fused one
        output, weights = module(query, key, value, **kwargs)
    return output.detach(), None if weights is None else weights.detach()


def mha_formula(params: Mapping[str, torch.Tensor], num_heads: int, query, key, value,
                key_padding_mask=None, attn_mask=None, average_attn_weights=True, **bug) -> dict[str, torch.Tensor]:
    """Multi-head attention written out, with the known mistakes as options (CPU float64).
    Returns dict(attn_output, attn_weights), the weights averaged or per head as asked."""
    B, L, E = query.shape
    S, H = key.size(1), num_heads
    D = E // H
    if bug.get("self_only"):
        key = value = query
        S = L
    w = params["in_proj_weight"]
    b = params.get("in_proj_bias")
    order = bug.get("order", (0, 1, 2))
    ws = [w[i * E:(i + 1) * E] for i in order]
    bs = [None if b is None or bug.get("no_in_bias") else b[i * E:(i + 1) * E] for i in order]

    def project(x, i):
        y = x @ ws[i] if bug.get("in_proj_transposed") else x @ ws[i].T
        return y if bs[i] is None else y + bs[i]

    def split(x):
        n = x.size(1)
        if bug.get("split") == "no transpose":
            return x.reshape(B, H, n, D)
        if bug.get("split") == "interleaved":
            return x.reshape(B, n, D, H).permute(0, 3, 1, 2)
        return x.reshape(B, n, H, D).transpose(1, 2)

    q, k, v = split(project(query, 0)), split(project(key, 1)), split(project(value, 2))  # (B, H, ·, D)
    scale = {None: 1 / math.sqrt(D), "embed": 1 / math.sqrt(E), "none": 1.0, "head_dim": 1 / D}[bug.get("scale")]
    scores = q @ k.transpose(-2, -1) * scale  # (B, H, L, S)

    def apply(scores, mask, invert=False, ignore=False, as_numbers=False):
        if mask is None or ignore:
            return scores
        if mask.dtype != torch.bool:
            return scores + mask
        if as_numbers:
            return scores + mask.to(scores.dtype)
        return scores.masked_fill(~mask if invert else mask, NEG_INF)

    if attn_mask is not None:
        am = attn_mask
        if am.dim() == 3:
            am = am.view(H, B, L, S).transpose(0, 1) if bug.get("per_head_mask_head_major") else am.view(B, H, L, S)
        scores = apply(scores, am, bug.get("invert_attn_mask"), bug.get("ignore_attn_mask"),
                       bug.get("bool_mask_added"))
    if key_padding_mask is not None:
        scores = apply(scores, key_padding_mask.view(B, 1, 1, S), bug.get("invert_key_padding_mask"),
                       bug.get("ignore_key_padding_mask"), bug.get("bool_mask_added"))
    weights = scores.softmax(-1)  # (B, H, L, S)
    heads = weights @ v  # (B, H, L, D)
    if bug.get("merge") == "no transpose":
        merged = heads.reshape(B, L, E)
    elif bug.get("merge") == "interleaved":
        merged = heads.permute(0, 2, 3, 1).reshape(B, L, E)
    else:
        merged = heads.transpose(1, 2).reshape(B, L, E)
    output = merged if bug.get("no_out_proj") else merged @ params["out_proj.weight"].T
    if "out_proj.bias" in params and not bug.get("no_out_proj"):
        output = output + params["out_proj.bias"]
    reduce = bug.get("reduce", "mean" if average_attn_weights else "none")
    weights = {"mean": weights.mean(1), "none": weights, "sum": weights.sum(1)}[reduce]
    return dict(attn_output=output, attn_weights=weights)


def _mha_mistakes(params, H, q, k, v, kpm, am, need_weights, average) -> dict[str, Mistake]:
    """What known buggy implementations return, on the case's CPU float64 inputs."""
    found: dict[str, Mistake] = {}

    def add(name: str, hint: str, claims: Sequence[str] = ("attn_output", "attn_weights"), **bug):
        # a bug claims the outputs it changes: the others may be wrong for another reason
        out = mha_formula(params, H, q, k, v, kpm, am, average, **bug)
        claimed = [o for o in claims if need_weights or o == "attn_output"]
        found[name] = Mistake(hint, {o: out[o] for o in claimed})

    add("split no transpose", "Your heads look like a plain reshape (B, L, E) -> (B, H, L, E/H): reshape to "
        "(B, L, H, E/H) and then transpose, so that each head keeps every position of the sequence.",
        split="no transpose")
    add("split interleaved", "Your heads take interleaved features (h, h+H, ...): head h is the block of "
        "features h·E/H ... (h+1)·E/H - 1, as in nn.MultiheadAttention.", split="interleaved")
    add("merge no transpose", "Your heads are merged with a plain reshape (B, H, L, E/H) -> (B, L, E): "
        "transpose to (B, L, H, E/H) before the reshape, so that the features of one position stay together.",
        merge="no transpose", claims=["attn_output"])
    add("merge interleaved", "Your merged heads interleave their features: concatenate head 0's features, "
        "then head 1's, ... (the inverse of split_heads).", merge="interleaved", claims=["attn_output"])
    add("no out_proj", "Your output skips the output projection: apply self.out_proj to the merged heads "
        "(output = concat(heads) W_Oᵀ + b_O).", no_out_proj=True, claims=["attn_output"])
    names = "qkv"
    for order in itertools.permutations(range(3)):
        if order != (0, 1, 2):
            got = ", ".join(f"{names[i]} from rows of W_{names[j]}" for i, j in enumerate(order) if i != j)
            add(f"order {order}", f"The chunks of in_proj_weight are in the wrong order ({got}): its rows "
                "[0, E) are W_q, [E, 2E) are W_k and [2E, 3E) are W_v, and in_proj_bias is split the same way.",
                order=order)
    add("in_proj transposed", "Your projections use in_proj_weight untransposed: like nn.Linear it is stored "
        "(out_features, in_features), so q = query @ W_qᵀ + b_q (F.linear(query, W_q, b_q)).",
        in_proj_transposed=True)
    add("scale by sqrt(E)", "Your scores are divided by sqrt(embed_dim): each head scales by "
        "1/sqrt(head_dim), head_dim = embed_dim / num_heads.", scale="embed")
    add("no scale", "Your scores are not scaled: divide q kᵀ by sqrt(head_dim).", scale="none")
    add("scale by head_dim", "Your scores are divided by head_dim: divide by sqrt(head_dim).", scale="head_dim")
    if "in_proj_bias" in params:
        add("no in_proj_bias", "Your projections ignore in_proj_bias: q = query @ W_qᵀ + b_q, and the same "
            "for k and v.", no_in_bias=True)
    if q is not k and (q.size(1) == k.size(1) or (am is None and kpm is None)):  # else it fails to run
        add("self only", "Your module projects the query three times: project key with W_k and value "
            "with W_v (in cross-attention they differ from the query, and S may differ from L).",
            self_only=True)
    convention = ("for nn.MultiheadAttention a boolean True means the key may NOT be attended (masked), the "
                  "opposite of F.scaled_dot_product_attention's convention")
    if am is not None and am.dtype == torch.bool:
        add("attn_mask inverted", f"The polarity of your boolean attn_mask is inverted: {convention}.",
            invert_attn_mask=True)
    if kpm is not None and kpm.dtype == torch.bool:
        add("key_padding_mask inverted", f"The polarity of your boolean key_padding_mask is inverted: "
            f"{convention} (True marks padding).", invert_key_padding_mask=True)
    if am is not None and am.dtype == torch.bool and kpm is not None and kpm.dtype == torch.bool:
        add("both inverted", f"The polarity of your boolean masks is inverted: {convention}.",
            invert_attn_mask=True, invert_key_padding_mask=True)
    if am is not None:
        add("attn_mask ignored", "Your result ignores attn_mask.", ignore_attn_mask=True)
    if kpm is not None:
        add("key_padding_mask ignored", "Your result ignores key_padding_mask: the padded keys (True) of each "
            "batch element must get weight 0, for every head and query.", ignore_key_padding_mask=True)
    if (am is not None and am.dtype == torch.bool) or (kpm is not None and kpm.dtype == torch.bool):
        add("bool mask added", "Your boolean mask is added to the scores as 0/1: a boolean mask must send "
            "the masked scores (True) to -inf.", bool_mask_added=True)
    if am is not None and am.dim() == 3 and k.size(0) > 1 and H > 1:
        add("3-D mask head-major", "A 3-D attn_mask is (batch·num_heads, L, S) with batch element b, head h "
            "at index b·num_heads + h: view it as (batch, num_heads, L, S).", per_head_mask_head_major=True)
    if need_weights and H > 1:
        if average:
            add("not averaged", "Your attn_weights are per head: with average_attn_weights=True (the default) "
                "return their mean over the heads, (B, L, S).", reduce="none", claims=["attn_weights"])
        else:
            add("averaged", "Your attn_weights are averaged over the heads: with average_attn_weights=False "
                "return them per head, (B, num_heads, L, S).", reduce="mean", claims=["attn_weights"])
        add("summed", "Your attn_weights are summed over the heads: average them (each row then sums to 1).",
            reduce="sum", claims=["attn_weights"])
    if not need_weights:
        found["need_weights ignored"] = Mistake(
            "With need_weights=False nn.MultiheadAttention returns (attn_output, None): return None as the "
            "weights.", {"attn_weights is None": False})
    return found


@built_once_in_grader
def _mha_case(spec: Mapping[str, Any], device: torch.device) -> Case:
    c = with_defaults(spec, MHA_DEFAULTS)
    dtype, B, L, E, H, bias = as_dtype(c["dtype"]), c["batch"], c["L"], c["E"], c["H"], c["bias"]
    if E % H:
        raise ValueError(f"E={E} is not divisible by H={H}")
    kinds = {c["key_padding_mask"], c["attn_mask"]} - {"none"}
    if kinds - {"bool", "float"}:
        raise ValueError("masks are 'none', 'bool' or 'float'")
    if len(kinds) > 1:
        raise ValueError("nn.MultiheadAttention deprecates a bool mask with a float one: use one kind")
    if c["check"] not in ("forward", "parameters"):
        raise ValueError("check is 'forward' or 'parameters'")
    title = f"MultiHeadAttention({E}, {H}{'' if bias else ', bias=False'})"

    if c["check"] == "parameters":  # names and shapes, as nn.MultiheadAttention has them
        expected = tuple(sorted(f"{n} {tuple(p.shape)}" for n, p in _torch_mha(E, H, bias).named_parameters()))
        probe = torch.zeros((), device=device)

        def run_parameters(cls):
            module = cls(E, H, bias=bias)
            _flag_nn_multihead_attention(module, probe)
            return tuple(sorted(f"{n} {tuple(p.shape)}" for n, p in module.named_parameters()))

        return Case(inputs=f"{title}: parameter names and shapes", run=run_parameters,
                    expected={"parameters": expected}, like=probe)

    self_attention = c["S"] is None
    S = L if self_attention else c["S"]
    gen = generator(case_seed(spec, "MultiHeadAttention"))
    query = randn(B, L, E, gen=gen, dtype=dtype)  # (B, L, E)
    key = query if self_attention else randn(B, S, E, gen=gen, dtype=dtype)  # (B, S, E)
    value = query if self_attention else randn(B, S, E, gen=gen, dtype=dtype)  # (B, S, E)
    # weights keep q, k, v and the output of order 1; biases nonzero so that ignoring them shows
    std = E**-0.5
    params = {"in_proj_weight": randn(3 * E, E, gen=gen, dtype=dtype, std=std)}
    if bias:
        params["in_proj_bias"] = randn(3 * E, gen=gen, dtype=dtype, std=0.5)
    params["out_proj.weight"] = randn(E, E, gen=gen, dtype=dtype, std=std)
    if bias:
        params["out_proj.bias"] = randn(E, gen=gen, dtype=dtype, std=0.5)

    am_shape = (B * H, L, S) if c["mask_per_head"] else (L, S)
    attn_blocked = _blocked(am_shape, gen) if c["attn_mask"] != "none" else None
    pad = _blocked((B, S), gen) if c["key_padding_mask"] != "none" else None
    if attn_blocked is not None and pad is not None:  # no query may lose all its keys
        per_head = attn_blocked.view(-1, H, L, S) if c["mask_per_head"] else attn_blocked.expand(B, H, L, S)
        for b, h, i in (per_head | pad[:, None, None, :]).all(-1).nonzero().tolist():
            pad[b, (~per_head[b, h, i]).nonzero()[0, 0]] = False

    def as_float(blocked: torch.Tensor) -> torch.Tensor:  # -inf where blocked, other added values elsewhere
        return torch.where(blocked, NEG_INF, randn(*blocked.shape, gen=gen, dtype=torch.float64)).to(dtype)

    attn_mask = key_padding_mask = None
    if attn_blocked is not None:
        attn_mask = attn_blocked if c["attn_mask"] == "bool" else as_float(attn_blocked)
    if pad is not None:
        key_padding_mask = pad if c["key_padding_mask"] == "bool" else as_float(pad)

    kwargs: dict[str, Any] = {}  # only what the case sets, by nn.MultiheadAttention's names
    if key_padding_mask is not None:
        kwargs["key_padding_mask"] = key_padding_mask
    if attn_mask is not None:
        kwargs["attn_mask"] = attn_mask
    if not c["need_weights"]:
        kwargs["need_weights"] = False
    if not c["average_attn_weights"]:
        kwargs["average_attn_weights"] = False

    def ref(t):
        return None if t is None else reference(t, torch.bool if t.dtype == torch.bool else torch.float64)

    p64 = {name: reference(p) for name, p in params.items()}
    q64 = reference(query)
    k64, v64 = (q64, q64) if self_attention else (reference(key), reference(value))
    kpm64, am64 = ref(key_padding_mask), ref(attn_mask)
    output, weights = mha_reference(p64, H, q64, k64, v64, kpm64, am64, c["need_weights"], c["average_attn_weights"])
    expected: dict[str, Any] = {"attn_output": output}
    if c["need_weights"]:
        expected["attn_weights"] = weights
    else:
        expected["attn_weights is None"] = True

    q_dev = query.to(device)
    k_dev, v_dev = (q_dev, q_dev) if self_attention else (key.to(device), value.to(device))
    state = {name: p.to(device) for name, p in params.items()}
    kwargs = {name: a.to(device) if isinstance(a, torch.Tensor) else a for name, a in kwargs.items()}

    def run(cls):
        module = cls(E, H, bias=bias)
        _flag_nn_multihead_attention(module, q_dev)
        module = module.to(device=device, dtype=dtype)
        module.load_state_dict(state)
        module.eval()
        with torch.no_grad():
            result = module(q_dev, k_dev, v_dev, **kwargs)
        if not c["need_weights"] and isinstance(result, (tuple, list)) and len(result) == 2:
            result = (result[0], result[1] is None)
        return result

    tensors = dict(query=q_dev) if self_attention else dict(query=q_dev, key=k_dev, value=v_dev)
    shown = describe({**tensors, **kwargs}, like=q_dev, with_dtype=["key_padding_mask", "attn_mask"])
    if self_attention:
        shown = shown.replace("query", "query = key = value", 1)
    return Case(
        inputs=f"{title}; {shown}",
        run=run,
        expected=expected,
        like=q_dev,
        mistakes=lambda: _mha_mistakes(p64, H, q64, k64, v64, kpm64, am64, c["need_weights"],
                                       c["average_attn_weights"]),
    )


def check_multi_head_attention(cls: Callable, *, points: float, cases: Sequence[Mapping[str, Any]],
                               device: torch.device | None = None):
    """Check the class MultiHeadAttention(embed_dim, num_heads, bias=True) against
    nn.MultiheadAttention(batch_first=True); using that module, or F.multi_head_attention_forward, earns 0."""
    __tracebackhide__ = True
    device = device or pick_device()
    built = [_mha_case(c, device) for c in cases]
    return run_check("MultiHeadAttention", cls, built, points=points, forbidden=FORBIDDEN_MHA)


# --------------------------------------------------------------------------
# parameter count and cost


def _unambiguous(found: dict[str, Mistake]) -> dict[str, Mistake]:
    """The mistakes whose (plain) answer no other mistake gives: for some sizes two
    misconceptions give the same number, and a hint must not guess between them."""
    answers = [tuple(m.outputs.values()) for m in found.values()]
    return {name: m for name, m in found.items() if answers.count(tuple(m.outputs.values())) == 1}

COUNT_DEFAULTS = dict(embed_dim=16, num_heads=4, bias=True)
COST_DEFAULTS = dict(n=4, d=8, num_heads=2)


@built_once_in_grader
def _count_case(spec: Mapping[str, Any]) -> Case:
    c = with_defaults(spec, COUNT_DEFAULTS)
    E, H, bias = c["embed_dim"], c["num_heads"], c["bias"]
    if E % H:
        raise ValueError(f"embed_dim={E} is not divisible by num_heads={H}")
    expected = sum(p.numel() for p in _torch_mha(E, H, bias).parameters())  # PyTorch's module, on meta

    def mistakes() -> dict[str, Mistake]:
        b = 1 if bias else 0
        found = {
            "no out_proj": Mistake("Your count leaves out the output projection out_proj (embed_dim × "
                                   "embed_dim weights, plus a bias).", dict(count=3 * E * E + 3 * E * b)),
            "full matrices per head": Mistake(
                "Your count grows with num_heads: each head projects to head_dim = embed_dim/num_heads "
                "features, so the H heads together have the same embed_dim × embed_dim matrices as one head "
                "of width embed_dim. The count does not depend on num_heads.",
                dict(count=H * (3 * E * E + 3 * E * b) + E * E + E * b)),
            "one head only": Mistake(
                "Your count shrinks with num_heads: there are num_heads heads of embed_dim × head_dim "
                "weights each, embed_dim × embed_dim in all. The count does not depend on num_heads.",
                dict(count=3 * E * (E // H) + 3 * (E // H) * b + E * E + E * b)),
        }
        if bias:
            found["no biases"] = Mistake("Your count leaves out the biases: in_proj_bias has 3·embed_dim "
                                         "numbers and out_proj.bias embed_dim.", dict(count=4 * E * E))
        else:
            found["biases without bias"] = Mistake("With bias=False there are no biases: only in_proj_weight "
                                                   "and out_proj.weight.", dict(count=4 * E * E + 4 * E))
        return _unambiguous(found)

    return Case(
        inputs=f"embed_dim={E}, num_heads={H}, bias={bias}",
        run=lambda fn: _plain_number(fn(E, H, bias=bias)),
        expected=dict(count=expected),
        like=torch.zeros(()),  # no tensors in or out
        mistakes=mistakes,
    )


def multiply_adds_reference(n: int, d: int, num_heads: int) -> int:
    """Multiply-adds of the four matrix products of multi-head self-attention (n tokens, width d)."""
    h, dh = num_heads, d // num_heads
    projections = 3 * n * d * d  # Q, K, V: (n × d)(d × d) each
    scores = h * n * dh * n  # per head (n × dh)(dh × n)
    mix = h * n * n * dh  # per head (n × n)(n × dh)
    output = n * d * d  # (n × d)(d × d)
    return projections + scores + mix + output  # = 4nd² + 2n²d, whatever h


@built_once_in_grader
def _cost_case(spec: Mapping[str, Any]) -> Case:
    c = with_defaults(spec, COST_DEFAULTS)
    n, d, h = c["n"], c["d"], c["num_heads"]
    if d % h:
        raise ValueError(f"d={d} is not divisible by num_heads={h}")
    expected = multiply_adds_reference(n, d, h)

    def mistakes() -> dict[str, Mistake]:
        def m(hint, count):
            return Mistake(hint, dict(multiply_adds=count))

        return _unambiguous({
            "no output projection": m("Your count leaves out the output projection, (n × d)(d × d).",
                                      3 * n * d * d + 2 * n * n * d),
            "no projections": m("Your count leaves out the projections: Q, K, V and the output projection "
                                "cost n·d² each.", 2 * n * n * d),
            "one product per head": m("Your count has one n×n product per head: each head computes its scores "
                                      "Q_h K_hᵀ and also the weighted sum of its values, n²·d/h each.",
                                      4 * n * d * d + n * n * d),
            "heads not counted": m("Your attention term is n²·d/h per product: all h heads do it, n²·d in "
                                   "total. The cost does not depend on the number of heads.",
                                   4 * n * d * d + 2 * n * n * d // h),
            "full width per head": m("Your attention term grows with the heads: a head works on d/h features, "
                                     "so its products cost n²·d/h, n²·d for all h heads together.",
                                     4 * n * d * d + 2 * n * n * d * h),
            "multiplies and adds": m("Your count is twice the answer: a multiply-add (one product added to a "
                                     "sum) counts once, so (a × b)(b × c) costs a·b·c.", 2 * expected),
        })

    return Case(
        inputs=f"n={n}, d={d}, num_heads={h}",
        run=lambda fn: _plain_number(fn(n, d, h)),
        expected=dict(multiply_adds=expected),
        like=torch.zeros(()),  # no tensors in or out
        mistakes=mistakes,
    )


def check_mha_parameter_count(fn: Callable, *, points: float, cases: Sequence[Mapping[str, Any]]):
    """Check mha_parameter_count(embed_dim, num_heads, bias=True) against nn.MultiheadAttention's parameters."""
    __tracebackhide__ = True
    return run_check("mha_parameter_count", fn, [_count_case(c) for c in cases], points=points)


def check_mha_multiply_adds(fn: Callable, *, points: float, cases: Sequence[Mapping[str, Any]]):
    """Check mha_multiply_adds(n, d, num_heads): the multiply-adds of a self-attention forward pass."""
    __tracebackhide__ = True
    return run_check("mha_multiply_adds", fn, [_cost_case(c) for c in cases], points=points)
