"""Checks for assignment 05-masks: padding_mask, causal_mask, merge_masks and masked_attention.

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

Mask outputs are compared as exact booleans: the reference is a float64 tensor of 0 and 1 and the
case's `like` is a boolean tensor, so core.compare asks for dtype torch.bool (structure) and equal
values (0 and 1 are further apart than any tolerance). A merge_masks result is broadcast to
(B, H, L, S) in `run` before it is recorded. For a case with a mask, masked_attention's `run` also
returns the number of weights at masked positions that are not exactly 0, a plain int that must be
0 ("nonzero masked weights"), so that a finite fill such as -30 is caught whatever the tolerance.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import torch
import torch.nn as nn
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
INT_DTYPES = {"int64": torch.int64, "int32": torch.int32}
NONZERO = "nonzero masked weights"  # how many weights at masked positions are not exactly 0 (expected: 0)


def _bool_like(device: torch.device) -> torch.Tensor:
    """`like` of a mask output: the output must be torch.bool, on `device`."""
    return torch.zeros((), dtype=torch.bool, device=device)


def _as_mask(t: torch.Tensor) -> torch.Tensor:
    """A reference (or a bug's output) for a boolean output: CPU float64, 1 where True."""
    return reference(t)


def _check_spec(c: Mapping[str, Any], key: str, allowed: Sequence[Any]):
    if c[key] not in allowed:
        raise ValueError(f"{key} must be one of {list(allowed)}, not {c[key]!r}")


# --------------------------------------------------------------------------
# generated masks (True = not allowed)


def _lengths(B: int, S: int, gen: torch.Generator, padded: bool = True) -> torch.Tensor:
    """Real tokens per sentence, in 1..S. When S > 1 one sentence is padded and, when B > 1,
    another one is not (S is the longest length, as in a real batch): the rows differ."""
    if not padded:
        return torch.full((B,), S)
    lengths = torch.randint(1, S + 1, (B,), generator=gen)
    if S > 1:
        order = torch.randperm(B, generator=gen)
        lengths[order[0]] = int(torch.randint(1, S, (1,), generator=gen))
        if B > 1:
            lengths[order[1]] = S
    return lengths


def _right_padding(lengths: torch.Tensor, S: int) -> torch.Tensor:
    return torch.arange(S)[None, :] >= lengths[:, None]  # (B, S), True at padding


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


def _causal(L: int, S: int) -> torch.Tensor:
    return torch.ones(L, S, dtype=torch.bool).triu(1)  # True where key j > query i


# --------------------------------------------------------------------------
# padding_mask

PADDING_DEFAULTS = dict(B=2, S=6, padding="right", pad_id=None, dtype="int64")


@built_once_in_grader
def _padding_case(spec: Mapping[str, Any], device: torch.device) -> Case:
    c = with_defaults(spec, PADDING_DEFAULTS)
    _check_spec(c, "padding", ("right", "left", "none"))
    B, S, dtype = c["B"], c["S"], INT_DTYPES[c["dtype"]]
    pad_id = 0 if c["pad_id"] is None else c["pad_id"]
    gen = generator(case_seed(spec, "padding_mask"))
    vocab = 12
    ids = torch.randint(vocab - 1, (B, S), generator=gen)
    ids = ids + (ids >= pad_id).long()  # any id but pad_id: 0 is a real token when pad_id != 0
    pad = _right_padding(_lengths(B, S, gen, padded=c["padding"] != "none"), S)
    if c["padding"] == "left":
        pad = pad.flip(-1)
    tokens = ids.masked_fill(pad, pad_id).to(dtype)  # (B, S)

    expected = dict(mask=_as_mask(tokens == pad_id))

    def mistakes() -> dict[str, Mistake]:
        lengths = (tokens != pad_id).sum(-1, keepdim=True)  # (B, 1)
        found = {
            "inverted": Mistake(
                "Your mask is True at the real tokens: a key_padding_mask is True where the token IS "
                "padding (True = not allowed), that is tokens == pad_id.",
                dict(mask=_as_mask(tokens != pad_id)),
            ),
            "pad id 0": Mistake(
                "Your mask marks the tokens equal to 0: compare with the pad_id argument, which is "
                "not always 0.",
                dict(mask=_as_mask(tokens == 0)),
            ),
            "from lengths": Mistake(
                "Your mask assumes the padding is at the end of each sentence: padding can be anywhere "
                "(left padding, say); compare every token with pad_id.",
                dict(mask=_as_mask(torch.arange(S)[None, :] >= lengths)),
            ),
            "float": Mistake(
                "You return a float mask (-inf at padding): padding_mask returns a boolean mask, True at "
                "padding.",
                dict(mask=_float_mask(tokens == pad_id)),
            ),
            "unsqueezed": Mistake(
                "padding_mask returns shape (B, S); the views that broadcast it against the scores, "
                "(B, 1, S) or (B, 1, 1, S), come later, where the mask is used.",
                dict(mask=_as_mask((tokens == pad_id).view(B, 1, 1, S))),
            ),
        }
        if B != S:
            found["transposed"] = Mistake(
                "Your mask is transposed: it is (B, S), one row per sentence.",
                dict(mask=_as_mask((tokens == pad_id).T)),
            )
        return found

    token_arg = tokens.to(device)
    kwargs = {} if c["pad_id"] is None else dict(pad_id=pad_id)
    return Case(
        inputs=describe(dict(tokens=token_arg, **kwargs), like=token_arg),
        run=lambda fn: fn(token_arg, **kwargs),
        expected=expected,
        like=_bool_like(device),
        mistakes=mistakes,
    )


def check_padding_mask(fn: Callable, *, points: float, cases: Sequence[Mapping[str, Any]],
                       device: torch.device | None = None):
    """Check padding_mask(tokens, pad_id=0) -> (B, S) bool, True at padding."""
    __tracebackhide__ = True
    device = device or pick_device()
    return run_check("padding_mask", fn, [_padding_case(c, device) for c in cases], points=points)


# --------------------------------------------------------------------------
# causal_mask

CAUSAL_DEFAULTS = dict(size=5)


@built_once_in_grader
def _causal_case(spec: Mapping[str, Any], device: torch.device) -> Case:
    c = with_defaults(spec, CAUSAL_DEFAULTS)
    size = c["size"]
    # PyTorch's own: a float mask, -inf where attention is not allowed
    subsequent = nn.Transformer.generate_square_subsequent_mask(size, dtype=torch.float64)
    expected = dict(mask=_as_mask(subsequent == NEG_INF))

    def mistakes() -> dict[str, Mistake]:
        ones = torch.ones(size, size, dtype=torch.bool)
        return {
            "inverted": Mistake(
                "Your mask is True where attention is allowed (the lower triangle and the diagonal): "
                "here True = not allowed, so it is True above the diagonal, at the future keys j > i "
                "(the opposite of F.scaled_dot_product_attention's convention).",
                dict(mask=_as_mask(ones.tril())),
            ),
            "diagonal masked": Mistake(
                "Your mask also hides the diagonal: query i may attend key i itself, so only j > i is "
                "True (torch.triu with diagonal=1).",
                dict(mask=_as_mask(ones.triu())),
            ),
            "lower triangle": Mistake(
                "Your mask is True below the diagonal: the future keys j > i are above it, so use "
                "torch.triu(..., diagonal=1), not torch.tril.",
                dict(mask=_as_mask(ones.tril(-1))),
            ),
            "float": Mistake(
                "You return a float mask (0 and -inf, like nn.Transformer.generate_square_subsequent_mask): "
                "causal_mask returns a boolean mask, True above the diagonal.",
                dict(mask=subsequent),
            ),
        }

    return Case(
        inputs=describe(dict(size=size)),
        run=lambda fn: fn(size),
        expected=expected,
        like=_bool_like(torch.device("cpu")),  # causal_mask(size) has no device argument
        mistakes=mistakes,
    )


def check_causal_mask(fn: Callable, *, points: float, cases: Sequence[Mapping[str, Any]],
                      device: torch.device | None = None):
    """Check causal_mask(size) -> (size, size) bool, True above the diagonal (on the CPU)."""
    __tracebackhide__ = True
    return run_check("causal_mask", fn, [_causal_case(c, device) for c in cases], points=points)


# --------------------------------------------------------------------------
# merge_masks

MERGE_DEFAULTS = dict(B=2, H=3, L=5, S=None, padding=True, attn="causal")


def _broadcast(mask: Any, shape: tuple[int, ...]) -> Any:
    """`mask` broadcast to `shape` when it can be, else unchanged (the check then shows its shape)."""
    if not isinstance(mask, torch.Tensor):
        return mask
    try:
        return torch.broadcast_to(mask, shape)
    except RuntimeError:
        return mask


def _float_mask(mask: torch.Tensor) -> torch.Tensor:
    return torch.zeros(mask.shape, dtype=torch.float64).masked_fill(mask, NEG_INF)


def _mha_mask_reference(key_padding_mask, attn_mask, B: int, H: int, L: int, S: int, seed: int) -> torch.Tensor:
    """The positions nn.MultiheadAttention masks, (B, H, L, S) bool: where the per-head weights of
    F.multi_head_attention_forward (float64, random projections) are exactly 0."""
    gen = generator(seed)
    E = 2 * H
    query = randn(L, B, E, gen=gen, dtype=torch.float64)  # sequence first, as the functional form
    key = randn(S, B, E, gen=gen, dtype=torch.float64)
    in_proj_weight = randn(3 * E, E, gen=gen, dtype=torch.float64, std=E**-0.5)
    in_proj_bias = randn(3 * E, gen=gen, dtype=torch.float64, std=0.1)
    out_proj_weight = randn(E, E, gen=gen, dtype=torch.float64, std=E**-0.5)
    _, weights = F.multi_head_attention_forward(
        query, key, key, E, H, in_proj_weight, in_proj_bias, None, None, False, 0.0, out_proj_weight, None,
        training=False, key_padding_mask=key_padding_mask, need_weights=True, attn_mask=attn_mask,
        average_attn_weights=False,
    )  # (B, H, L, S)
    assert not weights.isnan().any(), "a generated mask hides every key of a query"
    return weights == 0


@built_once_in_grader
def _merge_case(spec: Mapping[str, Any], device: torch.device) -> Case:
    c = with_defaults(spec, MERGE_DEFAULTS)
    _check_spec(c, "attn", ("causal", "random", "heads", "none"))
    B, H, L = c["B"], c["H"], c["L"]
    S = c["S"] or L
    if not c["padding"] and c["attn"] == "none":
        raise ValueError("merge_masks needs key_padding_mask or attn_mask (padding=False and attn='none')")
    seed = case_seed(spec, "merge_masks")
    gen = generator(seed)
    lengths = _lengths(B, S, gen, padded=c["padding"])
    kpm = _right_padding(lengths, S) if c["padding"] else None  # (B, S)
    free = lengths.min()  # keys 0..free-1 are real tokens in every sentence
    attn = None
    if c["attn"] == "causal":
        attn = _causal(L, S)  # (L, S)
    elif c["attn"] == "random":
        attn = _random_block((L,), S, free, gen)  # (L, S)
    elif c["attn"] == "heads":  # one mask per sentence and head, sentence-major: index b * H + h
        attn = _random_block((B, H, L), S, lengths.view(B, 1, 1), gen).reshape(B * H, L, S)

    shape = (B, H, L, S)
    expected = dict(mask=_as_mask(_mha_mask_reference(kpm, attn, B, H, L, S, seed + 1)))

    def mistakes() -> dict[str, Mistake]:
        pad4 = kpm.view(B, 1, 1, S) if kpm is not None else None  # (B, 1, 1, S)
        attn4 = attn.view(B, H, L, S) if attn is not None and attn.dim() == 3 else attn  # (L, S) | (B, H, L, S)
        found: dict[str, Mistake] = {}

        def add(name: str, hint: str, bug: Callable[[], torch.Tensor]):
            try:
                out = bug()
            except RuntimeError:  # the bug raises for this case's shapes
                return
            found[name] = Mistake(hint, dict(mask=_as_mask(_broadcast(out, shape))))

        merged = _or
        add("inverted", "Your mask is True where attention is allowed: here True = NOT allowed "
            "(nn.MultiheadAttention's convention), so merge the masks as they are, without ~.",
            lambda: ~merged(pad4, attn4))
        if kpm is not None and attn is not None:
            add("and", "A position is masked when key_padding_mask OR attn_mask masks it: combine them with "
                "| (logical or); & keeps only the positions both mask.", lambda: pad4 & attn4)
            add("sum", "Adding boolean masks as numbers gives 2 where both mask: combine them with | "
                "(logical or) and return a boolean mask.", lambda: pad4.long() + attn4.long())
            add("padding ignored", "Your mask ignores key_padding_mask when attn_mask is given: "
                "mask the padded keys too.", lambda: attn4)
            add("attn ignored", "Your mask ignores attn_mask when key_padding_mask is given.", lambda: pad4)
        if kpm is not None:
            wrong_view = ("key_padding_mask (B, S) must be viewed as (B, 1, 1, S) (sentence, head, query, key), "
                          "so that it broadcasts over the heads and the queries of (B, H, L, S)")
            add("no head axis", f"{wrong_view}; (B, 1, S) is read as (1, B, 1, S), one sentence per head.",
                lambda: merged(kpm.view(B, 1, S), attn4))
            add("as is", f"{wrong_view}; as (B, S) it is read as (L, S).", lambda: merged(kpm, attn4))
            add("query axis", "Your mask hides the padded QUERIES (rows): key_padding_mask marks padded keys, "
                "so it masks columns (the last dim, S): view it as (B, 1, 1, S).",
                lambda: merged(kpm.view(B, 1, S, 1), attn4))
        if attn is not None and attn.dim() == 3:
            add("heads first", "A 3-D attn_mask (B·H, L, S) holds sentence b, head h at index b·H + h: "
                "view it as (B, H, L, S), not (H, B, L, S).",
                lambda: merged(pad4, attn.view(H, B, L, S).transpose(0, 1)))
        add("float", "You return a float mask (0 and -inf): merge_masks returns a boolean mask, True = not "
            "allowed.", lambda: _float_mask(merged(pad4, attn4)))
        return found

    args = [None if m is None else m.to(device) for m in (kpm, attn)]
    return Case(
        inputs=describe(dict(key_padding_mask=args[0], attn_mask=args[1], num_heads=H), like=_bool_like(device)),
        run=lambda fn: _broadcast(fn(args[0], args[1], H), shape),
        expected=expected,
        like=_bool_like(device),
        mistakes=mistakes,
    )


def check_merge_masks(fn: Callable, *, points: float, cases: Sequence[Mapping[str, Any]],
                      device: torch.device | None = None):
    """Check merge_masks(key_padding_mask, attn_mask, num_heads) -> bool mask broadcastable to
    (B, H, L, S), compared with the positions nn.MultiheadAttention masks."""
    __tracebackhide__ = True
    device = device or pick_device()
    return run_check("merge_masks", fn, [_merge_case(c, device) for c in cases], points=points)


# --------------------------------------------------------------------------
# masked_attention

ATTENTION_DEFAULTS = dict(B=2, H=None, L=5, S=None, E=8, Ev=None, dtype="float32", padding=True, attn="causal")


def _pad_view(kpm: torch.Tensor, dims: int) -> torch.Tensor:
    """(B, S) -> (B, 1, S) for 3-D scores, (B, 1, 1, S) for 4-D ones."""
    B, S = kpm.shape
    return kpm.view(B, *[1] * (dims - 2), S)


def _or(a: torch.Tensor | None, b: torch.Tensor | None) -> torch.Tensor | None:
    return b if a is None else a if b is None else a | b


def _block(kpm, attn, dims: int):
    """The merged mask, broadcastable to the scores (True = not allowed), or None."""
    return _or(None if kpm is None else _pad_view(kpm, dims), attn)


def _softmax_out(scores: torch.Tensor, value: torch.Tensor) -> dict[str, torch.Tensor]:
    weights = scores.softmax(-1)
    return dict(output=weights @ value, weights=weights)


def _count_nonzero(weights: Any, block: torch.Tensor, shape: torch.Size) -> int | None:
    """How many weights at masked positions are not exactly 0 (NaN counts: NaN != 0), a plain int
    compared exactly; None when the weights are not a tensor of the expected shape."""
    if not isinstance(weights, torch.Tensor) or weights.shape != shape:
        return None
    return int((weights.detach()[block.to(weights.device).expand(shape)] != 0).sum())


def _attention_mistakes(q, k, v, kpm, attn, expected) -> dict[str, Mistake]:
    """The outputs of known buggy implementations, all on CPU float64 inputs."""
    dims = q.dim()
    B, L, S, E = q.size(0), q.size(-2), k.size(-2), q.size(-1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(E)  # (B, [H,] L, S)
    block = _block(kpm, attn, dims)
    found: dict[str, Mistake] = {}

    def add(name: str, hint: str, bug: Callable[[], dict[str, torch.Tensor]]):
        try:
            out = bug()
        except RuntimeError:  # the bug raises for this case's shapes
            return
        if NONZERO in expected and "weights" in out:
            out[NONZERO] = _count_nonzero(out["weights"], block, expected["weights"].shape)
        found[name] = Mistake(hint, out)

    def masked(mask, fill=NEG_INF):
        return scores if mask is None else scores.masked_fill(mask, fill)

    if block is None:
        add("no scale", "Your scores are not scaled: divide q kᵀ by sqrt(E), E = query.size(-1).",
            lambda: _softmax_out(q @ k.transpose(-2, -1), v))
        return found

    inverted = ("Your mask is inverted: here True = NOT allowed (nn.MultiheadAttention's convention), so the "
                "scores become -inf where the mask is True; you masked the allowed positions (True = may "
                "attend is F.scaled_dot_product_attention's convention: pass it ~mask).")
    pad = None if kpm is None else _pad_view(kpm, dims)
    add("inverted", inverted, lambda: _softmax_out(masked(~block), v))
    add("sdpa not inverted", "Your output is attention with the mask inverted: F.scaled_dot_product_attention "
        "reads a boolean mask as True = MAY attend, so pass it ~mask.",
        lambda: dict(output=F.scaled_dot_product_attention(q, k, v, attn_mask=block)))
    if kpm is not None and attn is not None:
        add("padding inverted", inverted, lambda: _softmax_out(masked(~pad | attn), v))
        add("attn inverted", inverted, lambda: _softmax_out(masked(pad | ~attn), v))
        add("and", "A key is hidden when key_padding_mask OR attn_mask masks it: combine the masks with | "
            "(logical or), not &.", lambda: _softmax_out(masked(pad & attn), v))
    if kpm is not None:
        add("padding ignored", "Your result ignores key_padding_mask: padded keys must get weight 0.",
            lambda: _softmax_out(masked(attn), v))
        view = ("view key_padding_mask (B, S) as (B, 1, S) for inputs (B, L, E) and as (B, 1, 1, S) for "
                "(B, H, L, E), so that it broadcasts over the queries (and the heads)")
        rows = kpm.view(B, *[1] * (dims - 3), S, 1)  # (B, S, 1) or (B, 1, S, 1): the query axis
        add("query axis", f"Your mask hides padded QUERIES (rows): key_padding_mask marks padded keys, "
            f"the columns of the scores; {view}.", lambda: _softmax_out(masked(_or(rows, attn)), v))
        other = _pad_view(kpm, 7 - dims)  # (B, 1, S) for 4-D scores, (B, 1, 1, S) for 3-D ones
        add("wrong view", f"key_padding_mask is broadcast along the wrong axes: {view}.",
            lambda: _softmax_out(masked(_or(other, attn)), v))
    if attn is not None:
        add("attn ignored", "Your result ignores attn_mask: the scores must become -inf where it is True.",
            lambda: _softmax_out(masked(pad), v))
    add("fill 0", "Masked scores must become -inf before the softmax (so that their weight is 0), not 0: "
        "a score of 0 is an ordinary score.", lambda: _softmax_out(masked(block, 0.0), v))
    after = lambda: scores.softmax(-1).masked_fill(block, 0.0)  # noqa: E731
    add("after softmax", "Mask the scores before the softmax: zeroing weights after it leaves rows that no "
        "longer sum to 1 (the other keys must share the whole weight).",
        lambda: dict(output=after() @ v, weights=after()))
    add("no scale", "Your scores are not scaled: divide q kᵀ by sqrt(E), E = query.size(-1).",
        lambda: _softmax_out((q @ k.transpose(-2, -1)).masked_fill(block, NEG_INF), v))
    if NONZERO in expected:  # after the bugs that also leave nonzero masked weights
        found["finite fill"] = Mistake(
            "Masked positions must get weight exactly 0: fill the masked scores with float('-inf'). A finite "
            "fill (say -30) leaves tiny nonzero weights.",
            {NONZERO: int(block.expand(scores.shape).sum())},
        )
    return found


@built_once_in_grader
def _attention_case(spec: Mapping[str, Any], device: torch.device) -> Case:
    c = with_defaults(spec, ATTENTION_DEFAULTS)
    _check_spec(c, "attn", ("causal", "random", "none"))
    dtype, B, H, L, E = as_dtype(c["dtype"]), c["B"], c["H"], c["L"], c["E"]
    S, Ev = c["S"] or L, c["Ev"] or E
    heads = () if H is None else (H,)
    gen = generator(case_seed(spec, "masked_attention"))
    query = randn(B, *heads, L, E, gen=gen, dtype=dtype)  # (B, [H,] L, E)
    key = randn(B, *heads, S, E, gen=gen, dtype=dtype)  # (B, [H,] S, E)
    value = randn(B, *heads, S, Ev, gen=gen, dtype=dtype)  # (B, [H,] S, Ev)
    lengths = _lengths(B, S, gen, padded=c["padding"])
    kpm = _right_padding(lengths, S) if c["padding"] else None  # (B, S)
    attn = None
    if c["attn"] == "causal":
        attn = _causal(L, S)  # (L, S)
    elif c["attn"] == "random":
        attn = _random_block((L,), S, lengths.min(), gen)  # (L, S)

    q64, k64, v64 = reference(query), reference(key), reference(value)
    block = _block(kpm, attn, query.dim())  # (B, [1,] L, S), (L, S) or None
    scores = q64 @ k64.transpose(-2, -1) / math.sqrt(E)
    weights = (scores if block is None else scores.masked_fill(block, NEG_INF)).softmax(-1)
    expected = dict(
        # PyTorch's own output; its boolean mask means True = may attend
        output=F.scaled_dot_product_attention(q64, k64, v64, attn_mask=None if block is None else ~block),
        weights=weights,
    )
    if block is not None:
        expected[NONZERO] = 0

    args = [t.to(device) for t in (query, key, value)]
    kwargs = {}
    if kpm is not None:
        kwargs["key_padding_mask"] = kpm.to(device)
    if attn is not None:
        kwargs["attn_mask"] = attn.to(device)

    def run(fn):
        result = fn(*args, **kwargs)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            what = type(result).__name__ + (f" of length {len(result)}" if isinstance(result, (tuple, list)) else "")
            raise TypeError(f"masked_attention returned a {what}; it must return a tuple (output, weights)")
        if block is None:
            return tuple(result)
        # computed here, on the student's weights, so that it is recorded with the outputs
        return (*result, _count_nonzero(result[1], block, expected["weights"].shape))

    return Case(
        inputs=describe(dict(query=args[0], key=args[1], value=args[2], **kwargs), like=args[0]),
        run=run,
        expected=expected,
        like=args[0],
        mistakes=lambda: _attention_mistakes(q64, k64, v64, kpm, attn, expected),
    )


def check_masked_attention(fn: Callable, *, points: float, cases: Sequence[Mapping[str, Any]],
                           device: torch.device | None = None):
    """Check masked_attention(query, key, value, key_padding_mask=None, attn_mask=None) -> (output, weights)
    against F.scaled_dot_product_attention with the merged mask inverted (its True = may attend)."""
    __tracebackhide__ = True
    device = device or pick_device()
    return run_check("masked_attention", fn, [_attention_case(c, device) for c in cases], points=points)
