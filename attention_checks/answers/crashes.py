"""A check's own reading of a crash: the hints for a case whose code raised, read off the error
text ("raised Type: message\n at: line") and the case's inputs, before the generic ones of
answers.hints. They compute no answer (the float64 references and the known mistakes stay in the
assignments' modules), so they ship with the checks: a student's notebook reads a crash as the
grader does."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable

from .hints import mask_contract_hints, split_error

if TYPE_CHECKING:
    from ..cases import Inputs, Spec


def _mha_crash(x: Inputs, spec: Spec, error: str) -> list[str]:
    """Crashes with masks: the contract says which may be None, and how each lines up with the scores."""
    hints = mask_contract_hints(error, x.kwargs, ("key_padding_mask", "attn_mask"), "(B, 1, 1, S)")
    first, line = split_error(error)
    if "must match the size of tensor" in first and (not line or "mask" in line) and "attn_mask" in x.kwargs \
            and x.kwargs["attn_mask"].dim() == 3:
        hints.append("A 3-D attn_mask is (B·num_heads, L, S): view it as (B, num_heads, L, S) to line it up "
                     "with the scores.")
    return hints


def _attention_crash(x: Inputs, spec: Spec, error: str) -> list[str]:
    return mask_contract_hints(error, x.named, ("key_padding_mask", "attn_mask"),
                               "(B, 1, S) for inputs (B, L, E) and (B, 1, 1, S) for (B, H, L, E)")


def _merge_crash(x: Inputs, spec: Spec, error: str) -> list[str]:
    return mask_contract_hints(error, x.named, ("key_padding_mask", "attn_mask"), "(B, 1, 1, S)")


def _module_crash(x: Inputs, spec: Spec, error: str) -> list[str]:
    """A decoder's own reading of a crash whose sizes are the target's and the source's lengths;
    [] for any other crash (the generic hints then)."""
    first, _ = split_error(error)
    T, S = spec["T"], spec["S"]
    roles = ("the cross-attention's query is the target (x, the first sublayer's output) and its keys and "
             "values are the memory, multihead_attn(x, memory, memory)")
    m = re.search(r"Expected key_padded_mask\.shape\[1\] to be (\d+), but got (\d+)", first)
    if m and {int(m[1]), int(m[2])} == {T, S}:
        keys, mask = ("the target", "memory_key_padding_mask") if int(m[1]) == T else ("the memory",
                                                                                       "tgt_key_padding_mask")
        return [f"An attention has {keys} as its keys ({m[1]} of them) but gets {mask} ({m[2]} entries): either the "
                f"mask is the wrong one (the self-attention takes tgt_key_padding_mask, the cross-attention "
                f"memory_key_padding_mask), or the attention's query and keys are not the tensors you meant: {roles}."]
    m = re.search(r"The size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton "
                  r"dimension 1", first)
    if m and {int(m[1]), int(m[2])} == {T, S}:
        return [f"A tensor with one row per source token (S = {S}) meets one with a row per target position "
                f"(T = {T}): an attention gives one row per query, so {roles}; the layer's output has the "
                "target's length."]
    m = re.search(r"The shape of the 2D attn_mask is torch\.Size\(\[(\d+), (\d+)\]\), but should be \((\d+), (\d+)\)",
                  first)
    if m and {int(m[1]), int(m[2]), int(m[3]), int(m[4])} <= {T, S}:
        return [f"An attn_mask is (queries, keys) of its attention ({m[3]} x {m[4]} here, yours is {m[1]} x {m[2]}): "
                "either the mask is the wrong one (the causal tgt_mask (T, T) belongs to the self-attention, "
                f"memory_mask (T, S) to the cross-attention), or {roles}."]
    return []


def _softmax_crash(x: Inputs, spec: Spec, error: str) -> list[str]:
    if "NotStreamed" not in error:
        return []
    # what the check observed: how many numbers one reduction took, against the block and the row
    seen = re.search(r"reduces (\d+) numbers at once.*blocks of (\d+) .*a row of (\d+)", error)
    if seen and int(seen[1]) < int(seen[3]):
        return [f"Your online_softmax reduces {seen[1]} numbers at once: more than one block ({seen[2]}), less "
                f"than a whole row ({seen[3]}). A step reads past its block (check the bounds of each slice, "
                "x[..., start:start + block_size]) or several blocks at once; each step reduces one block only."]
    return ["Your online_softmax reduces a whole row at once (x.max(-1), x.sum(-1), a running cumsum or "
            "cummax, a pooling or a product with a vector of ones over all N entries): an online softmax never "
            "holds more than one block of a row; read the row block by block, keeping a running maximum and a "
            "running sum of each row."]


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


def _cache_crash(x: Inputs, spec: Spec, error: str) -> list[str]:
    """What a KVCache that raised got wrong, read off PyTorch's or Python's message (the check calls
    KVCache(), len(cache) before any update and after each, and k_all, v_all = cache.update(k, v))."""
    first, line = split_error(error)
    found = re.search(r"Sizes of tensors must match except in dimension (-?\d+)", first)
    if found and found[1] in ("2", "-2") and not line:
        # the check's own cat, along the positions, of what the updates returned: their other axes differ
        return ["torch.cat along the positions (dim 2) meets tensors whose other axes differ, in the check's join "
                "of what your updates return: update returns everything cached so far, (B, heads, positions, "
                "head_dim), with only the positions growing; concatenate along dim=2 (or -2)."]
    if found and found[1] in ("2", "-2"):
        # the student's cat along the positions, as it should be: the tensors joined differ along another
        # axis, which no two updates of one case do (said as what the message shows, not a guess at the cause)
        return ["torch.cat along the positions (dim 2) meets tensors whose other axes differ, on your line: no two "
                "updates of one case have another batch, heads or head_dim, so your cache holds a tensor from another "
                "cache (state kept in a class attribute or a global is shared by every KVCache), or changes the shape "
                "of k or v before it stores them."]
    if found:  # the cache's own torch.cat, or the check's of what update returned (along the positions)
        return [f"Your cache grows along another axis than the positions (dim {found[1]}): torch.cat needs the "
                "other axes, the positions among them, to be equal, and they are not once an update brings another "
                "number of positions. Concatenate along the positions axis, dim=2 (or -2) of (B, heads, positions, "
                "head_dim)."]
    if re.search(r"expected Tensor as element \d+ in argument \d+, but got NoneType", first):
        return ["Your first update concatenates onto the empty cache's None: there is nothing to concatenate to "
                "yet; store k and v as they are when the cache is empty (if self.keys is None: ...), and "
                "concatenate from the second update on."]
    if "NoneType" in first and ("len" in line or "shape" in line or "size" in line or "has no len" in first
                                or "attribute 'shape'" in first or "attribute 'size'" in first):
        return ["len(cache) is 0 while the cache is empty (the check asks before the first update): return 0 "
                "when self.keys is None, and self.keys.shape[-2] after."]
    if re.search(r"cannot unpack non-iterable NoneType|cannot unpack non-iterable", first):
        return ["update must return the cached keys and values, everything so far with the new positions last: "
                "return self.keys, self.values (the caller writes k_all, v_all = cache.update(k, v))."]
    if re.search(r"cannot be interpreted as an integer|__len__\(\) should return", first):
        return ["__len__ must return a plain int, the number of positions cached: self.keys.shape[-2] (a Python "
                "int), 0 while empty; not a tensor, a float or the whole shape."]
    if re.search(r"__init__\(\) missing|takes \d+ positional argument", first) and "__init__" in first:
        return ["KVCache() takes no arguments: the check (and a model) creates it empty, KVCache(), and it grows "
                "with each update."]
    if re.search(r"expanded size of the tensor|out of bounds|must match the existing size", first):
        return ["Your cache has room for a fixed number of positions, and more positions come than it holds: grow "
                "it with each update (torch.cat([self.keys, k], dim=-2)), since the number of positions a model "
                "will generate is not known in advance."]
    return []


def _decoding_crash(x: Inputs, spec: Spec, error: str) -> list[str]:
    if "NoneType" in error:
        return ["The cache is empty (its keys are None) before the first update: call "
                "k_all, v_all = cache.update(k, v) first and attend to what it returns, so that the new "
                "token sees itself and everything before it (updating after attending reads a stale cache)."]
    return []


def _sample_crash(x: Inputs, spec: Spec, error: str) -> list[str]:
    if "probability tensor contains either" in error or "invalid multinomial distribution" in error:
        return ["A row of your distribution is not one: all zeros (NaN once renormalised) or negative. Top-p "
                "always keeps the most probable token, and the one that makes the sum reach top_p: a token is "
                "kept when the tokens more probable than it sum to less than top_p."]
    return []


# graded name -> its reading of a crash
CRASHES: dict[str, Callable[["Inputs", "Spec", str], list[str]]] = {
    "MultiHeadAttention": _mha_crash,
    "merge_masks": _merge_crash,
    "masked_attention": _attention_crash,
    "DecoderLayer": _module_crash,
    "Decoder": _module_crash,
    "Transformer": _module_crash,
    "online_softmax": _softmax_crash,
    "flash_attention": _flash_crash,
    "KVCache": _cache_crash,
    "cached_decoding": _decoding_crash,
    "sample_next": _sample_crash,
}
