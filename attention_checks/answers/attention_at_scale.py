"""How 09-attention-at-scale is judged: references (torch.softmax and F.scaled_dot_product_attention,
with enable_gqa for grouped heads, in float64 on the CPU) and the known mistakes of each piece, made
by the same algorithms with one bug switched on."""
from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from ..cases import Inputs, Spec
from ..core import as_dtype
from .catalogue import Answer, Mistake

Tensor = torch.Tensor
NEG_INF = float("-inf")


# --------------------------------------------------------------------------
# online_softmax


def _flags(bug: str | None) -> set[str]:
    """A known mistake's switches: "a+b" is the two together (e.g. a bug and the tiles it skips)."""
    return set(bug.split("+")) if bug else set()


def _running_max(m: Tensor, block_max: Tensor, bugs: set[str]) -> Tensor:
    """The new running maximum: of the old one and the block's, or (a known mistake) the block's alone."""
    return block_max if "block max" in bugs else torch.maximum(m, block_max)


def _rescale(m: Tensor, m_new: Tensor, bugs: set[str]) -> Tensor | float:
    """exp(m_old - m_new), what the running sums are multiplied by when the maximum moves, or a
    known mistake's factor: the inverse. With "first block apart" the first block sets the sums and
    the maximum (a student's m = first.max() before the loop): no -inf to rescale from, so an
    inverse shows as wrong values rather than NaN, and a maximum never updated is the first one."""
    if "no shift" in bugs:
        return 1.0
    factor = torch.exp(m_new - m) if "rescale inverted" in bugs else torch.exp(m - m_new)
    return torch.where(torch.isinf(m), 0.0, factor) if "first block apart" in bugs else factor


def _keeps_max(m: Tensor, bugs: set[str]) -> bool:
    """Whether the running maximum is updated after a block (m: before it)."""
    return "max not updated" not in bugs or ("first block apart" in bugs and bool(torch.isinf(m).all()))


def streamed_softmax(x: Tensor, block_size: int, bug: str | None = None) -> Tensor:
    """softmax over the last dim from a running maximum and a running sum, block by block, or the
    same with one known bug."""
    bugs = _flags(bug)
    N = x.shape[-1]
    m = torch.full_like(x[..., :1], NEG_INF)  # (..., 1): the running maximum
    l = torch.zeros_like(x[..., :1])  # (..., 1): the running sum of exp(x - m)
    last = N - block_size + 1 if "last block skipped" in bugs else N
    for start in range(0, last, block_size):
        block = x[..., start:start + block_size]
        m_new = _running_max(m, block.amax(-1, keepdim=True), bugs)
        rescale = 1.0 if "sum not rescaled" in bugs else _rescale(m, m_new, bugs)
        shift = 0.0 if "no shift" in bugs else m_new
        l = l * rescale + torch.exp(block - shift).sum(-1, keepdim=True)
        if _keeps_max(m, bugs):
            m = m_new
    return torch.exp(x - (0.0 if "no shift" in bugs else m)) / l


def _softmax_reference(x: Inputs, spec: Spec) -> dict[str, Any]:
    return dict(output=torch.softmax(x.args["x"], dim=-1))


# the running maximum's mistakes: their hints say what they do to the values, which at ordinary
# magnitudes may be nothing (the shift cancels out) and at large ones NaN or inf
BLOCK_MAX = ("Your running maximum is replaced by each block's maximum (m = block.max()) instead of "
             "m_new = maximum(m, block.max()): the shift cancels out while exp stays finite, but once a later "
             "block's maximum is far below an earlier one, exp(m_old - m_new) and exp(x - m) overflow. Keep the "
             "largest value seen so far.")
NO_SHIFT = ("You never subtract the maximum: exp(x) overflows to inf once an entry passes about 88 in float32 "
            "(11 in float16), and inf / inf is NaN. Keep a running maximum m and sum exp(x - m), rescaling the "
            "sum by exp(m_old - m_new) when m grows.")
RESCALE_INVERTED = ("Your rescale factor is inverted: when the maximum grows from m_old to m_new, the terms summed "
                    "so far are multiplied by exp(m_old - m_new) (at most 1), not exp(m_new - m_old). (With m_old "
                    "= -inf at the start, the inverse is exp(inf) = inf, and 0 · inf = NaN.)")
MAX_NOT_UPDATED = ("Your running maximum is never updated: after each block set m = m_new (the maximum of m and "
                   "the block's maximum), or the sums are rescaled from a stale m and the final exp(x - m) uses it.")
SOFTMAX_BUGS = {
    "sum not rescaled": "Your running sum is not rescaled when the maximum changes: the terms summed so far are "
                        "exp(x - m_old); before adding a block's terms, multiply the sum by exp(m_old - m_new), "
                        "so that every term is relative to the same, new maximum.",
    "max not updated": MAX_NOT_UPDATED,
    "max not updated+first block apart": MAX_NOT_UPDATED,
    "last block skipped": "The last, partial block is left out of your running statistics: range(0, N - "
                          "block_size + 1, block_size) or N // block_size blocks stop before it; step through "
                          "range(0, N, block_size) (the last slice is simply shorter).",
    "block max": BLOCK_MAX,
    "no shift": NO_SHIFT,
    "rescale inverted": RESCALE_INVERTED,
    "rescale inverted+first block apart": RESCALE_INVERTED,
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
    return found  # one block (block_size >= N): several bugs give the same output, and the judge names each


# --------------------------------------------------------------------------
# flash_attention


def _causal_allowed(rows: Tensor, cols: Tensor, i: int, j: int, L: int, S: int, block_size: int,
                    bugs: set[str]) -> Tensor:
    """Which scores of the tile at (query block i, key block j) a causal mask keeps (rows, cols: the
    positions), or what a known mistake keeps."""
    if "block causal" in bugs:
        return cols // block_size <= rows // block_size
    if "bottom right" in bugs:  # the last query sees the last key (the convention of a cache), not key i
        return cols <= rows + S - L
    if "tile indices" in bugs:  # positions counted from each tile's start, not the sequence's
        return cols - j <= rows - i
    return cols <= rows


def tiled_attention(q: Tensor, k: Tensor, v: Tensor, block_size: int, causal: bool, bug: str | None = None) -> Tensor:
    """Attention block by block (FlashAttention's forward pass), or the same with one known bug."""
    bugs = _flags(bug)
    L, S, E = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1.0 if "no scale" in bugs else 1 / math.sqrt(E)
    masked = 0.0 if "filled with 0" in bugs else NEG_INF
    out = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)  # (..., L, Ev)
    last_q = L - block_size + 1 if "last query block skipped" in bugs else L
    last_k = S - block_size + 1 if "last key block skipped" in bugs else S
    for i in range(0, last_q, block_size):
        q_block = q[..., i:i + block_size, :]  # (..., b, E)
        rows = torch.arange(i, i + q_block.shape[-2])[:, None]  # positions of the queries
        m = torch.full((*q_block.shape[:-1], 1), NEG_INF, dtype=q.dtype)
        l = torch.zeros_like(m)
        acc = torch.zeros(*q_block.shape[:-1], v.shape[-1], dtype=q.dtype)
        for j in range(0, last_k, block_size):
            if causal and ("diagonal skipped" in bugs and j >= i or "later tiles skipped" in bugs and j > rows.max()):
                break  # the tiles a student's loop leaves out: from the diagonal on, or after the last query
            k_block, v_block = k[..., j:j + block_size, :], v[..., j:j + block_size, :]
            scores = q_block @ k_block.transpose(-2, -1) * scale  # (..., b, b)
            cols = torch.arange(j, j + k_block.shape[-2])[None, :]
            if causal and "causal ignored" not in bugs:
                scores = scores.masked_fill(~_causal_allowed(rows, cols, i, j, L, S, block_size, bugs), masked)
            m_new = _running_max(m, scores.amax(-1, keepdim=True), bugs)
            p = torch.exp(scores - (0.0 if "no shift" in bugs else m_new))
            alpha = _rescale(m, m_new, bugs)
            l = (l if "sum not rescaled" in bugs else l * alpha) + p.sum(-1, keepdim=True)
            acc = (acc if "output not rescaled" in bugs else acc * alpha) + p @ v_block
            if _keeps_max(m, bugs):
                m = m_new
        out[..., i:i + block_size, :] = acc / l
    return out


FLASH_MAX_NOT_UPDATED = ("Your running maximum is never updated (m = m_new is missing): from m = -inf each key block "
                         "then rescales what came before by exp(-inf) = 0, and only the last key block counts; from "
                         "a first block's maximum, the sums are rescaled from a stale m.")
FLASH_BUGS = {
    "sum not rescaled": "Your running sum is not rescaled when the maximum changes: multiply it by "
                        "exp(m_old - m_new) before adding the new block's row sums.",
    "output not rescaled": "Your running output (the weighted sum of values) is not rescaled when the maximum "
                           "changes: multiply it by exp(m_old - m_new) before adding the new block's p @ v, as "
                           "you do for the running sum.",
    "max not updated": FLASH_MAX_NOT_UPDATED,
    "max not updated+first block apart": FLASH_MAX_NOT_UPDATED,
    "block max": BLOCK_MAX,
    "block max+later tiles skipped": BLOCK_MAX,
    "no shift": NO_SHIFT,
    "rescale inverted": RESCALE_INVERTED,
    "rescale inverted+first block apart": RESCALE_INVERTED,
    "last key block skipped": "The last, partial block of keys is skipped: step through range(0, S, block_size); "
                              "the last slice k[..., j:j + block_size, :] is simply shorter.",
    "last query block skipped": "The last, partial block of queries is skipped (its rows stay 0): step through "
                                "range(0, L, block_size).",
    "no scale": "Your scores are not scaled: multiply q @ k^T by 1 / sqrt(E) (E = q.shape[-1]).",
}
TILE_INDICES = ("Your causal mask counts positions from each tile's start (the tile-local row > column), so every "
                "tile gets the same triangle: tiles below the diagonal lose keys they may see, tiles above it keep "
                "keys after the query. Compare the positions in the sequence: query i0 + row, key j0 + column.")
BOTTOM_RIGHT = ("Your causal mask aligns the last query with the last key (key j allowed up to i + S - L, as with a "
                "cache): this exercise follows F.scaled_dot_product_attention(is_causal=True), where query i sees "
                "keys 0 .. i whatever S is (top-left alignment). The two agree only when L == S.")
FILLED_WITH_0 = ("Your masked scores are 0, not -inf: a score of 0 still gets the weight exp(0 - m) in the softmax, "
                 "so the query sees keys after it. Fill masked scores with float('-inf') (every row keeps at least "
                 "key 0, so no row is all -inf).")
CAUSAL_BUGS = {  # only for causal cases
    "block causal": "Your causal mask compares block indices, not positions: inside the diagonal block a query "
                    "still sees the keys after it. Mask key position j > query position i, with positions "
                    "counted from each block's start (i0 + row, j0 + column).",
    "causal ignored": "Your output ignores causal=True: mask the scores of keys after each query's position.",
    "bottom right": BOTTOM_RIGHT,
    "tile indices": TILE_INDICES,
    "tile indices+later tiles skipped": TILE_INDICES,
    "diagonal skipped": "Your loop skips the tile on the diagonal (key block j0 == query block i0): its keys up to "
                        "each query's own position count, the query itself included. Skip only the tiles whose "
                        "first key comes after the block's last query (j0 > i0 + rows - 1), and mask inside the "
                        "others. (The first query block sees no key at all without it: 0 / 0 = NaN.)",
    "bottom right+later tiles skipped": BOTTOM_RIGHT,
    "filled with 0": FILLED_WITH_0,
    "filled with 0+later tiles skipped": FILLED_WITH_0,
}


def _flash_reference(x: Inputs, spec: Spec) -> dict[str, Any]:
    q, k, v, _ = x.args.values()
    return dict(output=F.scaled_dot_product_attention(q, k, v, is_causal=x.kwargs["causal"]))


def _flash_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    q, k, v, b = x.args.values()
    causal = x.kwargs["causal"]
    dtype = as_dtype(spec["dtype"])
    q, k, v = (t.to(dtype) for t in (q, k, v))  # overflows as for the student
    bugs = {**FLASH_BUGS, **(CAUSAL_BUGS if causal else {})}
    # where several give the same output (one block, L == S), the judge names each
    return {bug: Mistake(hint, dict(output=tiled_attention(q, k, v, b, causal, bug).double()))
            for bug, hint in bugs.items()}


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
    return found  # one chunk: several masks give the same output, and the judge names each


ANSWERS = {
    "online_softmax": Answer(_softmax_reference, _softmax_mistakes),
    "flash_attention": Answer(_flash_reference, _flash_mistakes),
    "KVCache": Answer(lambda x, spec: _cache_answers(x, spec), _cache_mistakes),
    "GroupedQueryAttention": Answer(_gqa_reference, _gqa_mistakes),
    "cached_decoding": Answer(_decoding_reference, _decoding_mistakes),
}
