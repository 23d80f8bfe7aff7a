"""How 04-multi-head is judged: references and known mistakes of split_heads, merge_heads,
MultiHeadAttention, mha_parameter_count and mha_multiply_adds, on float64 CPU inputs.

MultiHeadAttention's reference is nn.MultiheadAttention(E, H, bias=bias, batch_first=True) in eval
mode with the case's weights; its mistakes are the same computation written out with a bug
(``mha_formula``). Some expected values are plain Python values, compared exactly: the parameter
names and shapes (a tuple of strings), the counts (ints), and whether the weights are None (a bool,
reported as the output "attn_weights is None").
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Mapping, Sequence

import torch
import torch.nn as nn

from ..cases import Inputs, Spec
from ..core import quiet
from .catalogue import Answer, Mistake

NEG_INF = float("-inf")


# --------------------------------------------------------------------------
# split_heads and merge_heads


def split_reference(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    B, L, E = x.shape
    return x.reshape(B, L, num_heads, E // num_heads).transpose(1, 2)  # (B, H, L, E/H)


def merge_reference(x: torch.Tensor) -> torch.Tensor:
    B, H, L, D = x.shape
    return x.transpose(1, 2).reshape(B, L, H * D)  # (B, L, H·D)


def _split_reference(x: Inputs, spec: Spec) -> dict[str, torch.Tensor]:
    return dict(heads=split_reference(x.args["x"], spec["H"]))


def _split_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    x64, H = x.args["x"], spec["H"]
    B, L, E = x64.shape
    D = E // H
    return {
        "no transpose": Mistake(
            "Your heads look like x.reshape(B, H, L, E/H): a reshape alone cuts the memory (the tokens one "
            "after another) into H pieces, so each head gets a stretch of the sequence, not a slice of every "
            "token's features. Reshape to (B, L, H, E/H) first, then transpose the L and H dims.",
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


def _merge_reference(x: Inputs, spec: Spec) -> dict[str, torch.Tensor]:
    return dict(merged=merge_reference(x.args["x"]))


def _merge_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    x64 = x.args["x"]
    B, H, L, D = x64.shape
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


# --------------------------------------------------------------------------
# MultiHeadAttention


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
    with torch.enable_grad(), quiet():  # grad on: the documented slow path, not the fused one
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
        if mask.dtype != torch.bool and bug.get("float_as_bool"):
            return scores.masked_fill(mask != 0, NEG_INF)
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



def mha_mistakes(params, H, q, k, v, kpm, am, need_weights, average, self_attention) -> dict[str, Mistake]:
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
    if not self_attention and (q.size(1) == k.size(1) or (am is None and kpm is None)):  # else it fails to run
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
    if (am is not None and am.dtype != torch.bool) or (kpm is not None and kpm.dtype != torch.bool):
        add("float mask as bool", "Your float mask is used as a boolean (every nonzero entry masked, hence rows "
            "of NaN): a float mask is ADDED to the scores (scores + mask); only a boolean mask goes through "
            "masked_fill.", float_as_bool=True)
    if not need_weights:
        found["need_weights ignored"] = Mistake(
            "With need_weights=False nn.MultiheadAttention returns (attn_output, None): return None as the "
            "weights.", {"attn_weights is None": False})
    return found




def parameter_names(E: int, H: int, bias: bool) -> tuple[str, ...]:
    """nn.MultiheadAttention's parameter names and shapes, as the check records the student's."""
    return tuple(sorted(f"{n} {tuple(p.shape)}" for n, p in _torch_mha(E, H, bias).named_parameters()))


def _mha_reference(x: Inputs, spec: Spec) -> dict[str, Any]:
    if spec["check"] == "parameters":
        return {"parameters": parameter_names(spec["E"], spec["H"], spec["bias"])}
    masks = {n: x.kwargs.get(n) for n in ("key_padding_mask", "attn_mask")}
    output, weights = mha_reference(x.extra["state"], spec["H"], *x.args.values(), **masks,
                                    need_weights=spec["need_weights"], average_attn_weights=spec["average_attn_weights"])
    if not spec["need_weights"]:
        return {"attn_output": output, "attn_weights is None": True}
    return {"attn_output": output, "attn_weights": weights}


def _mha_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    E, H, bias = spec["E"], spec["H"], spec["bias"]
    if spec["check"] == "parameters":
        found = {}
        if not bias:
            found["biases without bias"] = Mistake(
                "With bias=False the module has no biases: register_parameter('in_proj_bias', None) and "
                "out_proj = nn.Linear(E, E, bias=False), as nn.MultiheadAttention does.",
                {"parameters": parameter_names(E, H, True)})
        return found
    return mha_mistakes(x.extra["state"], H, *x.args.values(), x.kwargs.get("key_padding_mask"),
                        x.kwargs.get("attn_mask"), spec["need_weights"], spec["average_attn_weights"],
                        self_attention=spec["S"] is None)


# --------------------------------------------------------------------------
# parameter count and cost




def _count_reference(x: Inputs, spec: Spec) -> dict[str, int]:
    # PyTorch's own module, on the meta device
    return dict(count=sum(p.numel() for p in _torch_mha(spec["embed_dim"], spec["num_heads"], spec["bias"]).parameters()))


def _count_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    E, H, bias = spec["embed_dim"], spec["num_heads"], spec["bias"]
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
    return found  # where two give the same result, the judge names both


def multiply_adds_reference(n: int, d: int, num_heads: int) -> int:
    """Multiply-adds of the four matrix products of multi-head self-attention (n tokens, width d)."""
    h, dh = num_heads, d // num_heads
    projections = 3 * n * d * d  # Q, K, V: (n × d)(d × d) each
    scores = h * n * dh * n  # per head (n × dh)(dh × n)
    mix = h * n * n * dh  # per head (n × n)(n × dh)
    output = n * d * d  # (n × d)(d × d)
    return projections + scores + mix + output  # = 4nd² + 2n²d, whatever h




def _cost_reference(x: Inputs, spec: Spec) -> dict[str, int]:
    return dict(multiply_adds=multiply_adds_reference(spec["n"], spec["d"], spec["num_heads"]))


def _cost_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    n, d, h = spec["n"], spec["d"], spec["num_heads"]

    def m(hint, count):
        return Mistake(hint, dict(multiply_adds=count))

    return {  # where two give the same count, the judge names both
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
                                 "sum) counts once, so (a × b)(b × c) costs a·b·c.", 2 * expected["multiply_adds"]),
    }


ANSWERS = {
    "split_heads": Answer(_split_reference, _split_mistakes),
    "merge_heads": Answer(_merge_reference, _merge_mistakes),
    "MultiHeadAttention": Answer(_mha_reference, _mha_mistakes),
    "mha_parameter_count": Answer(_count_reference, _count_mistakes),
    "mha_multiply_adds": Answer(_cost_reference, _cost_mistakes),
}
