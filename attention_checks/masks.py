"""Checks for assignment 05-masks: padding_mask, causal_mask, merge_masks and masked_attention
(inputs only; they are judged by attention_checks.answers.masks).

Every mask here follows nn.MultiheadAttention: boolean, True = NOT allowed. A case is a small
dict; every key is optional:

    padding_mask:     B=2, S=6, padding="right" | "left" | "none", pad_id=None (not passed: the
                      default 0), dtype="int64" (of the token ids), seed
    causal_mask:      size=5
    merge_masks:      B=2, H=3, L=5, S=L, padding=True (a key_padding_mask (B, S), else None),
                      attn="causal" | "random" | "heads" | "none"  (attn_mask (L, S), (L, S),
                      (B*H, L, S) or None), seed
    masked_attention: B=2, H=None (inputs (B, L, E); an int: (B, H, L, E)), L=5, S=L, E=8, Ev=E,
                      dtype="float32", padding=True, attn="causal" | "random" | "none", seed

Without a seed, one is derived from the case. Generated masks never mask every key of a query
(untested behaviour): padding is on the right and leaves every sentence its first token, the
causal mask never hides key 0, and every row of a random attn_mask leaves a key that no sentence
pads.

Mask outputs are compared as exact booleans (their references are boolean tensors). A merge_masks
result is broadcast to (B, H, L, S) before it is recorded. For a case with a mask, masked_attention
also records the number of weights at masked positions that are not exactly 0, a plain int that
must be 0 ("nonzero masked weights"), so that a finite fill such as -30 is caught whatever the
tolerance: both are read off the student's output and the case's own masks, never off an answer.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch

from .cases import Inputs
from .core import as_dtype, describe, randn
from .inputs import pad_mask, padding_lengths
from .localise import axis, ladder
from .registry import Check, declare

INT_DTYPES = {"int64": torch.int64, "int32": torch.int32}
NONZERO = "nonzero masked weights"  # how many weights at masked positions are not exactly 0 (expected: 0)


def _check_spec(c: dict[str, Any], key: str, allowed: Sequence[Any]):
    if c[key] not in allowed:
        raise ValueError(f"{key} must be one of {list(allowed)}, not {c[key]!r}")


# --------------------------------------------------------------------------
# generated masks (True = not allowed)


def _lengths(B: int, S: int, gen: torch.Generator, padded: bool = True) -> torch.Tensor:
    """Real tokens per sentence, in 1..S (a padded batch: one sentence full, one padded), or all S."""
    return padding_lengths(B, S, gen) if padded else torch.full((B,), S)


def _random_block(rows: tuple[int, ...], S: int, free: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """A random (*rows, S) mask, True = not allowed. Row r leaves key anchor < free[r] allowed
    (a key no sentence pads), and masks at least one other key when S > 1."""
    block = torch.rand((*rows, S), generator=gen, dtype=torch.float64) < 0.4
    anchor = (torch.rand(rows, generator=gen, dtype=torch.float64) * free).long().unsqueeze(-1)  # < free
    block = block.scatter(-1, anchor, False)
    if S > 1:
        other = (anchor + torch.randint(1, S, (*rows, 1), generator=gen)) % S  # a different key
        block = block.scatter(-1, other, True)
    return block


def causal_block(L: int, S: int) -> torch.Tensor:
    return torch.ones(L, S, dtype=torch.bool).triu(1)  # True where key j > query i


def _describe_masks(x: Inputs, c: dict[str, Any]) -> str:
    """Every tensor here is a mask or token ids: shapes, their dtype and the device the case ran on."""
    return describe(x.named, like=x.like)  # like: the token ids, or the first mask


# --------------------------------------------------------------------------
# padding_mask


def _padding_inputs(c: dict[str, Any], gen: torch.Generator) -> Inputs:
    _check_spec(c, "padding", ("right", "left", "none"))
    B, S, dtype = c["B"], c["S"], INT_DTYPES[c["dtype"]]
    pad_id = 0 if c["pad_id"] is None else c["pad_id"]
    vocab = 12
    ids = torch.randint(vocab - 1, (B, S), generator=gen)
    ids = ids + (ids >= pad_id).long()  # any id but pad_id: 0 is a real token when pad_id != 0
    pad = pad_mask(_lengths(B, S, gen, padded=c["padding"] != "none"), S)
    if c["padding"] == "left":
        pad = pad.flip(-1)
    tokens = ids.masked_fill(pad, pad_id).to(dtype)  # (B, S)
    return Inputs(dict(tokens=tokens), {} if c["pad_id"] is None else dict(pad_id=pad_id))


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
PADDING_AXES = ladder(
    dict(B=1, S=3, padding="right"),
    axis("padding on the right", "where the padding is (the pad id, wherever it is)", (dict(padding="left"), "padding on the left"),
         (dict(padding="none"), "no padding")),
    axis("pad id 0", "the pad id you are given", (dict(pad_id=5), "pad_id=5")),
    axis("one sentence", "how sentences are kept apart", (dict(B=3), "3 sentences")),
    axis("int64 tokens", "the tokens' dtype", (dict(dtype="int32"), "int32 tokens")),
)

check_padding_mask = declare(Check(
    name="padding_mask", assignment="05-masks",
    axes=PADDING_AXES,
    defaults=dict(B=2, S=6, padding="right", pad_id=None, dtype="int64"),
    inputs=_padding_inputs, outputs=("mask",), describe=_describe_masks,
))


# --------------------------------------------------------------------------
# causal_mask


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
CAUSAL_AXES = ladder(
    dict(size=2),
    axis("size 2", "which side of the diagonal is masked (key j > query i)", (dict(size=1), "size 1"), downward=True),
    axis("size 2", "which side of the diagonal is masked (key j > query i)", (dict(size=5), "size 5")),
)

check_causal_mask = declare(Check(
    name="causal_mask", assignment="05-masks", defaults=dict(size=5),
    axes=CAUSAL_AXES,
    inputs=lambda c, gen: Inputs(dict(size=c["size"])), outputs=("mask",),
    on_device=False,  # causal_mask(size) has no device argument: its mask is on the CPU
))


# --------------------------------------------------------------------------
# merge_masks


def broadcast(mask: Any, shape: tuple[int, ...]) -> Any:
    """`mask` broadcast to `shape` when it can be, else unchanged (the report then shows its shape)."""
    if not isinstance(mask, torch.Tensor):
        return mask
    try:
        return torch.broadcast_to(mask, shape)
    except RuntimeError:
        return mask


def _merge_inputs(c: dict[str, Any], gen: torch.Generator) -> Inputs:
    _check_spec(c, "attn", ("causal", "random", "heads", "none"))
    B, H, L = c["B"], c["H"], c["L"]
    S = c["S"] or L
    if not c["padding"] and c["attn"] == "none":
        raise ValueError("merge_masks needs key_padding_mask or attn_mask (padding=False and attn='none')")
    lengths = _lengths(B, S, gen, padded=c["padding"])
    kpm = pad_mask(lengths, S) if c["padding"] else None  # (B, S)
    attn = None
    if c["attn"] == "causal":
        attn = causal_block(L, S)  # (L, S)
    elif c["attn"] == "random":
        attn = _random_block((L,), S, lengths.min(), gen)  # (L, S): keys 0..min-1 are real in every sentence
    elif c["attn"] == "heads":  # one mask per sentence and head, sentence-major: index b * H + h
        attn = _random_block((B, H, L), S, lengths.view(B, 1, 1), gen).reshape(B * H, L, S)
    return Inputs(dict(key_padding_mask=kpm, attn_mask=attn, num_heads=H))


def _merge_call(fn: Any, x: Inputs, c: dict[str, Any]) -> Any:
    S = c["S"] or c["L"]
    return broadcast(fn(*x.args.values()), (c["B"], c["H"], c["L"], S))


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
MERGE_MASKS_AXES = ladder(
    dict(B=1, H=1, L=2, padding=True, attn="none"),
    axis("a padding mask alone", "how the attention mask enters", (dict(attn="causal"), "a causal attention mask too"),
         (dict(attn="random", L=3), "a random attention mask too"), (dict(attn="heads", L=3), "an attention mask per head")),
    axis("a padding mask", "the attention mask alone (no padding)", (dict(padding=False, attn="causal"), "an attention mask alone")),
    axis("one head", "how the heads are kept apart", (dict(H=3, attn="causal"), "3 heads")),
    axis("one sentence", "how sentences are kept apart", (dict(B=3), "3 sentences")),
    axis("as many keys as queries", "the keys' axis (S, the last)", (dict(S=4, attn="causal"), "4 keys for 2 queries")),
)

check_merge_masks = declare(Check(
    name="merge_masks", assignment="05-masks",
    axes=MERGE_MASKS_AXES,
    defaults=dict(B=2, H=3, L=5, S=None, padding=True, attn="causal"),
    inputs=_merge_inputs, outputs=("mask",), call=_merge_call, describe=_describe_masks,
))


# --------------------------------------------------------------------------
# masked_attention


def pad_view(kpm: torch.Tensor, dims: int) -> torch.Tensor:
    """(B, S) -> (B, 1, S) for 3-D scores, (B, 1, 1, S) for 4-D ones."""
    B, S = kpm.shape
    return kpm.view(B, *[1] * (dims - 2), S)


def merged_block(kpm: torch.Tensor | None, attn: torch.Tensor | None, dims: int) -> torch.Tensor | None:
    """The merged mask as scores of ``dims`` dimensions see it (True = not allowed): ``dims``
    dimensions, ones where it does not vary, or None. The checks' helper, not merge_masks (issue
    58): it knows the scores' rank, never a number of heads, and a mask of more dimensions than
    the scores raises, so that a student who hands it merge_masks' arguments gets only a batch of
    one right (an attention mask alone comes back with the rank of a number of heads)."""
    pad = None if kpm is None else pad_view(kpm, dims)
    block = attn if pad is None else pad if attn is None else pad | attn
    if block is None:
        return None
    if block.dim() > dims:
        raise ValueError(f"a mask of shape {tuple(block.shape)} for scores of {dims} dimensions")
    return block.view(*[1] * (dims - block.dim()), *block.shape)


def count_nonzero(weights: Any, block: torch.Tensor, shape: torch.Size) -> int | None:
    """How many weights at masked positions are not exactly 0 (NaN counts: NaN != 0), a plain int
    compared exactly; None when the weights are not a tensor of the expected shape."""
    if not isinstance(weights, torch.Tensor) or weights.shape != shape:
        return None
    # a sum over the masked positions, not their selection: the same count, and a meta run
    # (probe.on_meta) goes on through it, where selecting by a mask stops it
    return int(((weights.detach() != 0) & block.to(weights.device).expand(shape)).sum())


def _attention_inputs(c: dict[str, Any], gen: torch.Generator) -> Inputs:
    _check_spec(c, "attn", ("causal", "random", "none"))
    dtype, B, H, L, E = as_dtype(c["dtype"]), c["B"], c["H"], c["L"], c["E"]
    S, Ev = c["S"] or L, c["Ev"] or E
    heads = () if H is None else (H,)
    query = randn(B, *heads, L, E, gen=gen, dtype=dtype)  # (B, [H,] L, E)
    key = randn(B, *heads, S, E, gen=gen, dtype=dtype)  # (B, [H,] S, E)
    value = randn(B, *heads, S, Ev, gen=gen, dtype=dtype)  # (B, [H,] S, Ev)
    lengths = _lengths(B, S, gen, padded=c["padding"])
    kwargs = {}
    if c["padding"]:
        kwargs["key_padding_mask"] = pad_mask(lengths, S)  # (B, S)
    if c["attn"] == "causal":
        kwargs["attn_mask"] = causal_block(L, S)  # (L, S)
    elif c["attn"] == "random":
        kwargs["attn_mask"] = _random_block((L,), S, lengths.min(), gen)  # (L, S)
    return Inputs(dict(query=query, key=key, value=value), kwargs)


def _attention_call(fn: Any, x: Inputs, c: dict[str, Any]) -> Any:
    result = fn(*x.args.values(), **x.kwargs)
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        what = type(result).__name__ + (f" of length {len(result)}" if isinstance(result, (tuple, list)) else "")
        raise TypeError(f"masked_attention returned a {what}; it must return a tuple (output, weights)")
    query, key = x.args["query"], x.args["key"]
    block = merged_block(x.kwargs.get("key_padding_mask"), x.kwargs.get("attn_mask"), query.dim())
    if block is None:
        return tuple(result)
    shape = (*query.shape[:-1], key.size(-2))  # (B, [H,] L, S)
    return (*result, count_nonzero(result[1], block, torch.Size(shape)))


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
MASKED_ATTENTION_AXES = ladder(
    dict(B=1, L=2, E=2, padding=False, attn="none", dtype="float64"),
    axis("no mask", "how the padding mask is applied", (dict(padding=True), "a padding mask")),
    axis("no mask", "how the attention mask is applied", (dict(attn="causal"), "a causal mask"), (dict(attn="random", L=3), "a random mask")),
    axis("no heads axis", "how the masks broadcast over the heads", (dict(H=2, padding=True, attn="causal"), "inputs with a heads axis")),
    axis("as many keys as queries", "the keys' axis", (dict(S=3, padding=True), "3 keys for 2 queries")),
)

check_masked_attention = declare(Check(
    name="masked_attention", assignment="05-masks",
    axes=MASKED_ATTENTION_AXES,
    defaults=dict(B=2, H=None, L=5, S=None, E=8, Ev=None, dtype="float32", padding=True, attn="causal"),
    inputs=_attention_inputs, outputs=("output", "weights", NONZERO), call=_attention_call,
))
