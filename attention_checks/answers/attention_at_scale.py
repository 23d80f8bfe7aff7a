"""How 09-attention-at-scale is judged: references (torch.softmax and F.scaled_dot_product_attention,
with enable_gqa for grouped heads, in float64 on the CPU) and the known mistakes of each piece, made
by the same algorithms with one bug switched on."""
from __future__ import annotations

import math
import re
from typing import Any

import torch
import torch.nn.functional as F

from ..core import as_dtype
from ..registry import Inputs, Spec
from .hints import unambiguous
from .judging import Answer, Mistake

Tensor = torch.Tensor
NEG_INF = float("-inf")


# --------------------------------------------------------------------------
# online_softmax


def streamed_softmax(x: Tensor, block_size: int, bug: str | None = None) -> Tensor:
    """softmax over the last dim from a running maximum and a running sum, block by block, or the
    same with one known bug."""
    N = x.shape[-1]
    m = torch.full_like(x[..., :1], NEG_INF)  # (..., 1): the running maximum
    l = torch.zeros_like(x[..., :1])  # (..., 1): the running sum of exp(x - m)
    last = N - block_size + 1 if bug == "last block skipped" else N
    for start in range(0, last, block_size):
        block = x[..., start:start + block_size]
        m_new = torch.maximum(m, block.amax(-1, keepdim=True))
        rescale = 1.0 if bug == "sum not rescaled" else torch.exp(m - m_new)
        l = l * rescale + torch.exp(block - m_new).sum(-1, keepdim=True)
        if bug != "max not updated":
            m = m_new
    return torch.exp(x - m) / l


def _softmax_reference(x: Inputs, spec: Spec) -> dict[str, Any]:
    return dict(output=torch.softmax(x.args["x"], dim=-1))


SOFTMAX_BUGS = {
    "sum not rescaled": "Your running sum is not rescaled when the maximum changes: the terms summed so far are "
                        "exp(x - m_old); before adding a block's terms, multiply the sum by exp(m_old - m_new), "
                        "so that every term is relative to the same, new maximum.",
    "max not updated": "Your running maximum is never updated: after each block set m = m_new (the maximum of "
                       "m and the block's maximum), or the final exp(x - m) uses a stale m.",
    "last block skipped": "The last, partial block is left out of your running statistics: range(0, N - "
                          "block_size + 1, block_size) or N // block_size blocks stop before it; step through "
                          "range(0, N, block_size) (the last slice is simply shorter).",
}


def _softmax_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    # in the input's dtype, so that overflows happen as they do for the student
    data, b = x.args["x"].to(as_dtype(spec["dtype"])), x.args["block_size"]
    found = {bug: Mistake(hint, dict(output=streamed_softmax(data, b, bug).double()))
             for bug, hint in SOFTMAX_BUGS.items()}
    per_block = torch.cat([torch.softmax(block.double(), -1) for block in data.split(b, dim=-1)], dim=-1)
    found["per block"] = Mistake("Each of your blocks sums to 1 on its own: the maximum and the sum must run over "
                                 "the whole row, and the division by the final sum comes after the last block.",
                                 dict(output=per_block))
    return unambiguous(found)  # one block (block_size >= N): several bugs give the same output


def _softmax_crash(x: Inputs, spec: Spec, error: str) -> list[str]:
    if "NotStreamed" in error:
        return ["Your online_softmax reduces a whole row at once (x.max(-1), x.sum(-1) or the like over all N "
                "entries): an online softmax never holds more than one block of a row; read the row block by "
                "block, keeping a running maximum and a running sum of each row."]
    return []


# --------------------------------------------------------------------------
# flash_attention


def tiled_attention(q: Tensor, k: Tensor, v: Tensor, block_size: int, causal: bool, bug: str | None = None) -> Tensor:
    """Attention block by block (FlashAttention's forward pass), or the same with one known bug."""
    L, S, E = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1.0 if bug == "no scale" else 1 / math.sqrt(E)
    out = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)  # (..., L, Ev)
    last_q = L - block_size + 1 if bug == "last query block skipped" else L
    last_k = S - block_size + 1 if bug == "last key block skipped" else S
    for i in range(0, last_q, block_size):
        q_block = q[..., i:i + block_size, :]  # (..., b, E)
        rows = torch.arange(i, i + q_block.shape[-2])[:, None]  # positions of the queries
        m = torch.full((*q_block.shape[:-1], 1), NEG_INF, dtype=q.dtype)
        l = torch.zeros_like(m)
        acc = torch.zeros(*q_block.shape[:-1], v.shape[-1], dtype=q.dtype)
        for j in range(0, last_k, block_size):
            k_block, v_block = k[..., j:j + block_size, :], v[..., j:j + block_size, :]
            scores = q_block @ k_block.transpose(-2, -1) * scale  # (..., b, b)
            cols = torch.arange(j, j + k_block.shape[-2])[None, :]
            if causal and bug == "block causal":
                scores = scores.masked_fill(cols // block_size > rows // block_size, NEG_INF)
            elif causal and bug != "causal ignored":
                scores = scores.masked_fill(cols > rows, NEG_INF)
            m_new = torch.maximum(m, scores.amax(-1, keepdim=True))
            p = torch.exp(scores - m_new)
            alpha = torch.exp(m - m_new)
            l = (l if bug == "sum not rescaled" else l * alpha) + p.sum(-1, keepdim=True)
            acc = (acc if bug == "output not rescaled" else acc * alpha) + p @ v_block
            if bug != "max not updated":
                m = m_new
        out[..., i:i + block_size, :] = acc / l
    return out


FLASH_BUGS = {
    "sum not rescaled": "Your running sum is not rescaled when the maximum changes: multiply it by "
                        "exp(m_old - m_new) before adding the new block's row sums.",
    "output not rescaled": "Your running output (the weighted sum of values) is not rescaled when the maximum "
                           "changes: multiply it by exp(m_old - m_new) before adding the new block's p @ v, as "
                           "you do for the running sum.",
    "max not updated": "Your running maximum is never updated (m = m_new is missing): each key block then "
                       "rescales what came before by exp(-inf) = 0, and only the last key block counts.",
    "last key block skipped": "The last, partial block of keys is skipped: step through range(0, S, block_size); "
                              "the last slice k[..., j:j + block_size, :] is simply shorter.",
    "last query block skipped": "The last, partial block of queries is skipped (its rows stay 0): step through "
                                "range(0, L, block_size).",
    "block causal": "Your causal mask compares block indices, not positions: inside the diagonal block a query "
                    "still sees the keys after it. Mask key position j > query position i, with positions "
                    "counted from each block's start (i0 + row, j0 + column).",
    "causal ignored": "Your output ignores causal=True: mask the scores of keys after each query's position.",
    "no scale": "Your scores are not scaled: multiply q @ k^T by 1 / sqrt(E) (E = q.shape[-1]).",
}


def _flash_reference(x: Inputs, spec: Spec) -> dict[str, Any]:
    q, k, v, _ = x.args.values()
    return dict(output=F.scaled_dot_product_attention(q, k, v, is_causal=x.kwargs["causal"]))


def _flash_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    q, k, v, b = x.args.values()
    causal = x.kwargs["causal"]
    dtype = as_dtype(spec["dtype"])
    q, k, v = (t.to(dtype) for t in (q, k, v))  # overflows as for the student
    return unambiguous({bug: Mistake(hint, dict(output=tiled_attention(q, k, v, b, causal, bug).double()))
                        for bug, hint in FLASH_BUGS.items() if causal or bug not in ("block causal", "causal ignored")})


def _flash_crash(x: Inputs, spec: Spec, error: str) -> list[str]:
    if "NotBlockwise" not in error:
        return []
    found = re.search(r"shape \(([\d, ]*)\)", error)
    shape = tuple(int(n) for n in found[1].split(",") if n.strip()) if found else ()
    L, S, b = x.args["q"].shape[-2], x.args["k"].shape[-2], x.args["block_size"]
    if shape[-2:] == (L, S):
        what = "the whole (L, S) score matrix (or a mask of that size)"
    elif shape[-2:] in ((b, S), (L, b)) or shape[-1:] == (S,):
        what = "a whole row (or column) of blocks of scores at once"
    else:
        what = f"a tensor of shape {shape}"
    return [f"Your flash_attention holds {what}: block by block, it keeps one ({b}, {b}) tile of scores "
            "q_block @ k_block^T at a time, with a running maximum, a running sum and a running output per "
            "query block; make causal masks from positions inside each tile, not for the whole matrix."]


# --------------------------------------------------------------------------
# KVCache


def _chunks(x: Inputs, spec: Spec) -> list[tuple[Tensor, Tensor]]:
    return [(x.args[f"k{i}"], x.args[f"v{i}"]) for i in range(len(spec["steps"]))]


def _cache_answers(x: Inputs, spec: Spec, bug: str | None = None) -> dict[str, Any]:
    keys = values = None
    seen_k, seen_v, lengths = [], [], [0]
    for n, (k, v) in enumerate(_chunks(x, spec), start=1):
        if bug == "new first":
            keys = k if keys is None else torch.cat([k, keys], dim=-2)
            values = v if values is None else torch.cat([v, values], dim=-2)
        elif bug == "values are keys":
            keys = k if keys is None else torch.cat([keys, k], dim=-2)
            values = keys
        else:
            keys = k if keys is None else torch.cat([keys, k], dim=-2)
            values = v if values is None else torch.cat([values, v], dim=-2)
        seen_k.append(k if bug == "new only" else keys)
        seen_v.append(v if bug == "new only" else values)
        lengths.append(n if bug == "counts updates" else keys.shape[-2])
    return dict(keys=torch.cat(seen_k, dim=-2), values=torch.cat(seen_v, dim=-2), lengths=lengths)


CACHE_BUGS = {
    "new only": "update returns only the new keys and values: it must return everything cached so far, the old "
                "positions followed by the new ones (torch.cat([self.keys, k], dim=-2)).",
    "new first": "Your cache puts the new positions before the old ones: concatenate old then new, "
                 "torch.cat([self.keys, k], dim=-2), so that position t stays at index t.",
    "values are keys": "Your cache returns the keys as the values: keep keys and values in two tensors.",
    "counts updates": "len(cache) counts the calls of update, not the positions cached: return the size of the "
                      "positions axis, self.keys.shape[-2] (0 while empty).",
}


def _cache_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    found = {}
    for bug, hint in CACHE_BUGS.items():
        answer = _cache_answers(x, spec, bug)
        if bug == "counts updates":  # only the lengths say it
            answer = dict(lengths=answer["lengths"], keys=None, values=None)
        found[bug] = Mistake(hint, answer)
    return found


# --------------------------------------------------------------------------
# GroupedQueryAttention and cached decoding


def _projections(x: Tensor, state: dict[str, Tensor], H: int, Hkv: int):
    """q (B, H, L, hd), k and v (B, Hkv, L, hd) of the input x (B, L, d_model)."""
    B, L, d = x.shape
    hd = d // H
    q = (x @ state["w_q.weight"].T).view(B, L, H, hd).transpose(1, 2)
    k = (x @ state["w_k.weight"].T).view(B, L, Hkv, hd).transpose(1, 2)
    v = (x @ state["w_v.weight"].T).view(B, L, Hkv, hd).transpose(1, 2)
    return q, k, v


def _merge(out: Tensor, state: dict[str, Tensor]) -> Tensor:
    B, H, L, hd = out.shape
    return out.transpose(1, 2).reshape(B, L, H * hd) @ state["w_o.weight"].T  # (B, L, d_model)


def _attend(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None, expand: str = "interleave",
            scale: float | None = None) -> Tensor:
    group = q.shape[1] // k.shape[1]
    if expand == "interleave":  # query head h reads key/value head h // group
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    else:  # query head h reads key/value head h % Hkv
        k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
    scores = q @ k.transpose(-2, -1) * (scale or 1 / math.sqrt(q.shape[-1]))
    if allowed is not None:
        scores = scores.masked_fill(~allowed, NEG_INF)
    return torch.softmax(scores, -1) @ v


def _gqa_heads(spec: Spec) -> tuple[int, int]:
    return spec["num_heads"], spec["num_kv_heads"]


def _gqa_reference(x: Inputs, spec: Spec) -> dict[str, Any]:
    q, k, v = _projections(x.args["x"], x.extra["state"], *_gqa_heads(spec))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)  # (B, H, L, hd)
    return dict(output=_merge(out, x.extra["state"]))


def _gqa_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    state, (H, Hkv) = x.extra["state"], _gqa_heads(spec)
    q, k, v = _projections(x.args["x"], state, H, Hkv)
    L = q.shape[-2]
    causal = torch.ones(L, L, dtype=torch.bool).tril()

    def output(**how) -> dict[str, Tensor]:
        return dict(output=_merge(_attend(q, k, v, **how), state))

    return {
        "repeat": Mistake("Your query heads read the wrong key/value heads: consecutive query heads share one "
                          "key/value head (head h reads h // (num_heads // num_kv_heads)), which is "
                          "repeat_interleave(group, dim=1); .repeat or .expand on a new leading axis gives "
                          "h % num_kv_heads.", output(allowed=causal, expand="repeat")),
        "not causal": Mistake("Your attention is not causal: position i may only attend to positions <= i.",
                              output(allowed=None)),
        "scale": Mistake("Scale the scores by 1 / sqrt(head_dim), the size of one head (d_model // num_heads), "
                         "not of d_model.", output(allowed=causal, scale=1 / math.sqrt(q.shape[1] * q.shape[-1]))),
    }


def _decoding_run(x: Inputs, spec: Spec, bug: str | None = None) -> dict[str, Any]:
    """The cached decoding of the check, chunk by chunk, or the same with one known bug."""
    state, (H, Hkv) = x.extra["state"], _gqa_heads(spec)
    keys = values = None
    outputs, start = [], 0
    for t in spec["steps"]:
        q, k, v = _projections(x.args["x"][:, start:start + t], state, H, Hkv)
        offset = 0 if keys is None else keys.shape[-2]
        cached_k = k.repeat_interleave(H // Hkv, 1) if bug == "repeated heads cached" else k
        cached_v = v.repeat_interleave(H // Hkv, 1) if bug == "repeated heads cached" else v
        keys = cached_k if keys is None else torch.cat([keys, cached_k], dim=-2)
        values = cached_v if values is None else torch.cat([values, cached_v], dim=-2)
        k_all, v_all = keys, values
        if bug == "new keys twice":
            k_all, v_all = torch.cat([keys, k], dim=-2), torch.cat([values, v], dim=-2)
        rows = offset + torch.arange(t)[:, None]  # the queries' positions
        cols = torch.arange(k_all.shape[-2])[None, :]
        allowed = {"offset ignored": cols <= rows - offset, "chunk sees the future": None,
                   "does not see itself": cols < rows,  # the mask aligned with the end of the keys:
                   "new keys twice": cols <= rows + k_all.shape[-2] - offset - t}.get(bug, cols <= rows)
        if bug == "repeated heads cached":  # attends correctly to the repeated heads
            out = _attend(q, k_all[:, ::H // Hkv], v_all[:, ::H // Hkv], allowed)
        else:
            out = _attend(q, k_all, v_all, allowed)
        outputs.append(_merge(out, state))
        start += t
    return dict(output=torch.cat(outputs, dim=1), cached_keys=keys)


def _decoding_reference(x: Inputs, spec: Spec) -> dict[str, Any]:
    full = _gqa_reference(x, spec)["output"]  # causal attention over the whole sequence at once
    keys = _projections(x.args["x"], x.extra["state"], *_gqa_heads(spec))[1]
    return dict(output=full, cached_keys=keys)


DECODING_BUGS = {
    "offset ignored": "Your causal mask ignores the positions already cached: a chunk's query i is at position "
                      "len(cache) + i (read len(cache) before the update) and may see keys 0 .. len(cache) + i.",
    "chunk sees the future": "Inside a chunk of several tokens your queries see the keys after them: mask key j > "
                             "len(cache) + i, with len(cache) read before the update (a prompt is one chunk).",
    "does not see itself": "Each query misses its own key (off by one): the query at position p may attend to "
                           "keys 0 .. p, itself included (mask key j > p, not j >= p).",
    "new keys twice": "The new keys and values count twice: cache.update(k, v) already returns the old positions "
                      "followed by the new ones; attend to what it returns, without concatenating k again.",
    "repeated heads cached": "Your cache holds the repeated key/value heads (num_heads of them): cache the "
                             "num_kv_heads heads and repeat after reading the cache, which is the memory that "
                             "grouped-query attention saves.",
}


def _decoding_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    found = {}
    for bug, hint in DECODING_BUGS.items():
        run = _decoding_run(x, spec, bug)
        if bug != "repeated heads cached":
            run["cached_keys"] = None  # these bugs cache the right keys
        else:
            run["output"] = None
        found[bug] = Mistake(hint, run)
    return unambiguous(found)  # one chunk: several masks give the same output


def _decoding_crash(x: Inputs, spec: Spec, error: str) -> list[str]:
    if "NoneType" in error:
        return ["The cache is empty (its keys are None) before the first update: call "
                "k_all, v_all = cache.update(k, v) first and attend to what it returns, so that the new "
                "token sees itself and everything before it (updating after attending reads a stale cache)."]
    return []


ANSWERS = {
    "online_softmax": Answer(_softmax_reference, _softmax_mistakes, crash=_softmax_crash),
    "flash_attention": Answer(_flash_reference, _flash_mistakes, crash=_flash_crash),
    "KVCache": Answer(lambda x, spec: _cache_answers(x, spec), _cache_mistakes),
    "GroupedQueryAttention": Answer(_gqa_reference, _gqa_mistakes),
    "cached_decoding": Answer(_decoding_reference, _decoding_mistakes, crash=_decoding_crash),
}
