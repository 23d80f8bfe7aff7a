"""How 05-masks is judged: references and known mistakes of padding_mask, causal_mask, merge_masks
and masked_attention, on CPU inputs (float64, masks boolean). Every mask follows
nn.MultiheadAttention: True = NOT allowed; mask references are boolean tensors, compared exactly.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..cases import Inputs, Spec
from ..core import generator, randn
from ..masks import NONZERO, broadcast, count_nonzero, merged_block, pad_view
from .catalogue import Answer, Mistake

NEG_INF = float("-inf")


def _float_mask(mask: torch.Tensor) -> torch.Tensor:
    return torch.zeros(mask.shape, dtype=torch.float64).masked_fill(mask, NEG_INF)


def _or(a: torch.Tensor | None, b: torch.Tensor | None) -> torch.Tensor | None:
    return b if a is None else a if b is None else a | b


# --------------------------------------------------------------------------
# padding_mask


def _padding_reference(x: Inputs, spec: Spec) -> dict[str, torch.Tensor]:
    return dict(mask=x.args["tokens"] == (spec["pad_id"] or 0))


def _padding_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    tokens, pad_id = x.args["tokens"], spec["pad_id"] or 0
    B, S = tokens.shape
    lengths = (tokens != pad_id).sum(-1, keepdim=True)  # (B, 1)
    found = {
        "inverted": Mistake(
            "Your mask is True at the real tokens: a key_padding_mask is True where the token IS "
            "padding (True = not allowed), that is tokens == pad_id.", dict(mask=tokens != pad_id)),
        "pad id 0": Mistake(
            "Your mask marks the tokens equal to 0: compare with the pad_id argument, which is "
            "not always 0.", dict(mask=tokens == 0)),
        "from lengths": Mistake(
            "Your mask assumes the padding is at the end of each sentence: padding can be anywhere "
            "(left padding, say); compare every token with pad_id.", dict(mask=torch.arange(S)[None, :] >= lengths)),
        "float": Mistake(
            "You return a float mask (-inf at padding): padding_mask returns a boolean mask, True at "
            "padding.", dict(mask=_float_mask(tokens == pad_id))),
        "unsqueezed": Mistake(
            "padding_mask returns shape (B, S); the views that broadcast it against the scores, "
            "(B, 1, S) or (B, 1, 1, S), come later, where the mask is used.",
            dict(mask=(tokens == pad_id).view(B, 1, 1, S))),
    }
    if B != S:
        found["transposed"] = Mistake("Your mask is transposed: it is (B, S), one row per sentence.",
                                      dict(mask=(tokens == pad_id).T))
    return found  # where two give the same result, the judge names both


# --------------------------------------------------------------------------
# causal_mask


def _subsequent(size: int) -> torch.Tensor:
    """PyTorch's own causal mask: float, -inf where attention is not allowed."""
    return nn.Transformer.generate_square_subsequent_mask(size, dtype=torch.float64)


def _causal_reference(x: Inputs, spec: Spec) -> dict[str, torch.Tensor]:
    return dict(mask=_subsequent(spec["size"]) == NEG_INF)


def _causal_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    size = spec["size"]
    ones = torch.ones(size, size, dtype=torch.bool)
    return {  # one token: "inverted" and "diagonal masked" both give [[True]]: the judge names both
        "inverted": Mistake(
            "Your mask is True where attention is allowed (the lower triangle and the diagonal): "
            "here True = not allowed, so it is True above the diagonal, at the future keys j > i "
            "(the opposite of F.scaled_dot_product_attention's convention).", dict(mask=ones.tril())),
        "diagonal masked": Mistake(
            "Your mask also hides the diagonal: query i may attend key i itself, so only j > i is "
            "True (torch.triu with diagonal=1).", dict(mask=ones.triu())),
        "lower triangle": Mistake(
            "Your mask is True below the diagonal: the future keys j > i are above it, so use "
            "torch.triu(..., diagonal=1), not torch.tril.", dict(mask=ones.tril(-1))),
        "float": Mistake(
            "You return a float mask (0 and -inf, like nn.Transformer.generate_square_subsequent_mask): "
            "causal_mask returns a boolean mask, True above the diagonal.", dict(mask=_subsequent(size))),
    }


# --------------------------------------------------------------------------
# merge_masks


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


def _merge_shape(spec: Spec) -> tuple[int, int, int, int]:
    return spec["B"], spec["H"], spec["L"], spec["S"] or spec["L"]


def _merge_reference(x: Inputs, spec: Spec) -> dict[str, torch.Tensor]:
    B, H, L, S = _merge_shape(spec)
    kpm, attn = x.args["key_padding_mask"], x.args["attn_mask"]
    return dict(mask=_mha_mask_reference(kpm, attn, B, H, L, S, seed=B * 1000 + H * 100 + L * 10 + S))


def _merge_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    B, H, L, S = shape = _merge_shape(spec)
    kpm, attn = x.args["key_padding_mask"], x.args["attn_mask"]
    pad4 = kpm.view(B, 1, 1, S) if kpm is not None else None  # (B, 1, 1, S)
    attn4 = attn.view(B, H, L, S) if attn is not None and attn.dim() == 3 else attn  # (L, S) | (B, H, L, S)
    found: dict[str, Mistake] = {}

    def add(name: str, hint: str, bug: Callable[[], torch.Tensor]):
        try:
            out = bug()
        except RuntimeError:  # the bug raises for this case's shapes
            return
        found[name] = Mistake(hint, dict(mask=broadcast(out, shape)))

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



# --------------------------------------------------------------------------
# masked_attention


def _softmax_out(scores: torch.Tensor, value: torch.Tensor) -> dict[str, torch.Tensor]:
    weights = scores.softmax(-1)
    return dict(output=weights @ value, weights=weights)


def attention_mistakes(q, k, v, kpm, attn, expected) -> dict[str, Mistake]:
    """The outputs of known buggy implementations, all on CPU float64 inputs."""
    dims = q.dim()
    B, S, E = q.size(0), k.size(-2), q.size(-1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(E)  # (B, [H,] L, S)
    block = merged_block(kpm, attn, dims)
    found: dict[str, Mistake] = {}

    def add(name: str, hint: str, bug: Callable[[], dict[str, torch.Tensor]]):
        try:
            out = bug()
        except RuntimeError:  # the bug raises for this case's shapes
            return
        if NONZERO in expected and "weights" in out:
            out[NONZERO] = count_nonzero(out["weights"], block, expected["weights"].shape)
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
    pad = None if kpm is None else pad_view(kpm, dims)
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
        other = pad_view(kpm, 7 - dims)  # (B, 1, S) for 4-D scores, (B, 1, 1, S) for 3-D ones
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



def _attention_reference(x: Inputs, spec: Spec) -> dict[str, Any]:
    q, k, v = x.args.values()
    block = merged_block(x.kwargs.get("key_padding_mask"), x.kwargs.get("attn_mask"), q.dim())  # or None
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    weights = (scores if block is None else scores.masked_fill(block, NEG_INF)).softmax(-1)
    # PyTorch's own output; its boolean mask means True = may attend
    expected: dict[str, Any] = dict(output=F.scaled_dot_product_attention(q, k, v, attn_mask=None if block is None
                                                                          else ~block), weights=weights)
    if block is not None:
        expected[NONZERO] = 0
    return expected


def _attention_answer_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    return attention_mistakes(*x.args.values(), x.kwargs.get("key_padding_mask"), x.kwargs.get("attn_mask"), expected)


ANSWERS = {
    "padding_mask": Answer(_padding_reference, _padding_mistakes),
    "causal_mask": Answer(_causal_reference, _causal_mistakes),
    "merge_masks": Answer(_merge_reference, _merge_mistakes),
    "masked_attention": Answer(_attention_reference, _attention_answer_mistakes),
}
