"""Checks for assignment 09-attention-at-scale: online_softmax, flash_attention, KVCache,
GroupedQueryAttention and cached decoding with it (inputs only; they are judged by
attention_checks.answers.attention_at_scale).

A case is a small dict; every key is optional:

    online_softmax:          shape=(3, 10), block_size=4, dtype="float32", std=1.0, seed
    flash_attention:         batch=(2, 2), L=20, S=None (= L), E=4, Ev=None (= E), block_size=8,
                             causal=False, dtype="float32", std=1.0, memory_mib=None, seed
    KVCache:                 batch=2, heads=2, E=4, steps=(3, 1, 2), dtype="float32", seed
    GroupedQueryAttention:   batch=2, L=5, d_model=8, num_heads=4, num_kv_heads=2, dtype="float32", seed
    cached_decoding:         the GroupedQueryAttention keys, and steps=(3, 1, 2) (L = their sum)

`batch` of flash_attention holds the leading dims, e.g. (2, 2) for (B, H) or (3,). `std` scales the
inputs: a large one gives scores in the hundreds, which overflow exp() unless the maximum is
subtracted. `steps` are the lengths of the chunks fed one after the other (a prompt, then tokens).

Streaming is checked, not only values: the check runs the student's code under ``Footprint``, a
dispatch mode that sees every tensor the code makes (shapes only). online_softmax may reduce over
one block at a time (a reduction over a whole row raises ``NotStreamed``); flash_attention may
make no tensor larger than its inputs, its output or one (block, block) tile of scores per
(batch, head) (the whole score matrix, or a whole row of blocks, raises ``NotBlockwise``). Both
are errors of the case, so that such a case earns nothing, and the grader reads their message.
Both watch from inside the student's process, so they explain; what decides streaming is measured
outside it: a flash_attention case with ``memory_mib`` is large (its whole score matrix is more than
twice that), and the grader fails it if the kernel used more than ``memory_mib`` MiB of memory while
the test cell ran (new, or held before and read or written: autograder.sandbox's fork server measures
it). Such a case goes in a test cell of its own, and skips the meta-device run, which would double its
time.

cached_decoding runs the student's GroupedQueryAttention on the chunks one after the other with a
static cache of the course's (``GivenKVCache``, made for the chunks it will get), and returns every
chunk's output, concatenated, and the keys the cache holds at the end.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .cases import Inputs, Spec
from .core import NotBlockwise, NotStreamed, as_dtype, describe, randn
from .modules import build_student_module, load_student_module
from .qkv import FORBIDDEN_SDPA
from .localise import MORE_THAN_ONE_TOKEN, axis, ladder
from .registry import Check, declare
from .softmax_scaling import FORBIDDEN_SOFTMAX

Tensor = torch.Tensor


# --------------------------------------------------------------------------
# what the student's code makes: shapes only


# aten reductions, by overload packet name: the extent of one is numel(input) / numel(output)
REDUCTIONS = {"amax", "amin", "max", "min", "sum", "nansum", "mean", "logsumexp", "prod", "argmax", "argmin",
              "aminmax", "std", "var", "linalg_vector_norm", "norm"}
# ... and what reduces without shrinking its input, each over so many entries: a running (cumulative)
# operation over its dimension, a pooling over its window, a matrix product over the contracted one
CUMULATIVE = {"cumsum", "cumprod", "logcumsumexp", "_logcumsumexp", "cummax", "cummin"}
POOLING = {"avg_pool1d", "avg_pool2d", "max_pool1d", "max_pool2d", "max_pool1d_with_indices",
           "max_pool2d_with_indices", "_adaptive_avg_pool2d", "adaptive_max_pool2d", "lp_pool1d"}
PRODUCTS = {"mm": 0, "bmm": 0, "mv": 0, "dot": 0, "vdot": 0, "addmm": 1, "baddbmm": 1, "addmv": 1, "addbmm": 1}


def reduction_extent(name: str, args: tuple, outputs: list[Tensor]) -> int:
    """How many entries of its input one output entry of the aten operation ``name`` depends on
    (1 for what is not a reduction)."""
    tensor = args[0] if args and isinstance(args[0], Tensor) else None
    if tensor is None or not outputs:
        return 1
    if name in REDUCTIONS and tensor.numel() > outputs[0].numel():
        return tensor.numel() // max(outputs[0].numel(), 1)
    if name in CUMULATIVE and len(args) > 1 and isinstance(args[1], int) and tensor.dim():
        return tensor.shape[args[1]]
    if name in POOLING:
        window = args[1] if len(args) > 1 else 1
        window = math.prod(window) if isinstance(window, (list, tuple)) else int(window)
        return max(window, tensor.numel() // max(outputs[0].numel(), 1))
    if name in PRODUCTS:
        first = args[PRODUCTS[name]]
        return first.shape[-1] if isinstance(first, Tensor) and first.dim() else 1
    return 1


class Footprint(TorchDispatchMode):
    """Records the largest tensor an operation made, among all its outputs (its number of elements and
    shape), and the largest reduction (how many elements went into one output element, and the
    operation: a reduction, a running sum or maximum, a pooling or a matrix product)."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # as probe._OnMeta's: nothing compiles here, and torch._dynamo stays unloaded

    def __init__(self):
        super().__init__()
        self.largest, self.largest_shape = 0, ()
        self.reduced, self.reduced_by = 1, ""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        # every output: a fused operator's second one may be the whole matrix of attention weights
        outputs = [t for t in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(t, Tensor)]
        for tensor in outputs:
            if tensor.numel() > self.largest:
                self.largest, self.largest_shape = tensor.numel(), tuple(tensor.shape)
        name = func.overloadpacket.__name__
        extent = reduction_extent(name, args, outputs)
        if extent > self.reduced:
            self.reduced, self.reduced_by = extent, name
        return out


def blocks(n: int, block_size: int) -> int:
    return -(-n // block_size)  # ceil(n / block_size)


# --------------------------------------------------------------------------
# online_softmax


def _softmax_inputs(c: Spec, gen: torch.Generator) -> Inputs:
    x = randn(*c["shape"], gen=gen, dtype=as_dtype(c["dtype"]), std=c["std"])  # (..., N)
    return Inputs(dict(x=x, block_size=c["block_size"]))


def _softmax_call(fn: Any, inputs: Inputs, spec: Spec) -> Any:
    x, block_size = inputs.args["x"], inputs.args["block_size"]
    with Footprint() as seen:
        out = fn(x, block_size)
    N = x.shape[-1]
    allowed = max(block_size, blocks(N, block_size))  # one block, or one statistic per block
    if seen.reduced > allowed:
        raise NotStreamed(f"your code reduces {seen.reduced} numbers at once ({seen.reduced_by}), but a "
                          f"stream of blocks of {block_size} never holds more than one block of a row of {N}")
    return out


def _softmax_describe(inputs: Inputs, spec: Spec) -> str:
    big = ", entries of magnitude 1e3" if spec["std"] >= 100 else ""
    return describe(inputs.named, like=inputs.like) + big


def _flash_describe(inputs: Inputs, spec: Spec) -> str:
    bound = f", using at most {spec['memory_mib']} MiB of memory" if spec["memory_mib"] else ""
    return _softmax_describe(inputs, spec) + bound


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
SOFTMAX_AXES = ladder(
    dict(shape=(1, 4), block_size=4, dtype="float64"),
    axis("a row of one block", "the step that combines blocks (the running maximum and sum)",
         (dict(shape=(1, 8)), "a row of two full blocks"), (dict(shape=(1, 10)), "two full blocks and a partial one")),
    axis("blocks of 4", "how a row is cut into blocks", (dict(shape=(1, 4), block_size=1), "blocks of one entry"),
         (dict(shape=(1, 4), block_size=3), "a block of 3 and a partial block of 1")),
    axis("one row", "the axis you reduce over (the last one, per row)", (dict(shape=(3, 4)), "three rows"),
         (dict(shape=(2, 3, 4)), "leading dims (2, 3)")),
    axis("entries of magnitude 1", "the maximum subtracted before exp", (dict(shape=(1, 8), std=1000.0),
                                                                          "two blocks with entries of magnitude 1e3")),
    axis("float64", "the maximum subtracted before exp (float16's exp overflows past 11)",
         (dict(shape=(1, 8), dtype="float16", std=8.0), "two blocks in float16 with entries past 11")),
)

check_online_softmax = declare(Check(
    name="online_softmax", assignment="09-attention-at-scale",
    axes=SOFTMAX_AXES,
    defaults=dict(shape=(3, 10), block_size=4, dtype="float32", std=1.0),
    inputs=_softmax_inputs, call=_softmax_call, describe=_softmax_describe, forbidden=FORBIDDEN_SOFTMAX,
))


# --------------------------------------------------------------------------
# flash_attention


def _flash_inputs(c: Spec, gen: torch.Generator) -> Inputs:
    dtype, batch, L, E = as_dtype(c["dtype"]), tuple(c["batch"]), c["L"], c["E"]
    S, Ev = c["S"] or L, c["Ev"] or E
    q = randn(*batch, L, E, gen=gen, dtype=dtype, std=c["std"])  # (..., L, E)
    k = randn(*batch, S, E, gen=gen, dtype=dtype, std=c["std"])  # (..., S, E)
    v = randn(*batch, S, Ev, gen=gen, dtype=dtype)  # (..., S, Ev)
    return Inputs(dict(q=q, k=k, v=v, block_size=c["block_size"]), dict(causal=c["causal"]))


def tile_budget(q: Tensor, k: Tensor, v: Tensor, block_size: int) -> int:
    """The most elements a tensor of a block-by-block attention needs: the inputs and the output
    (padded to whole blocks), or one (block, block) tile of scores per (batch, head)."""
    *lead, L, E = q.shape
    S, Ev = k.shape[-2], v.shape[-1]
    rows = max(blocks(L, block_size), blocks(S, block_size)) * block_size
    return math.prod(lead) * max(rows * max(E, Ev), block_size * block_size)


def _flash_call(fn: Any, inputs: Inputs, spec: Spec) -> Any:
    q, k, v, block_size = inputs.args.values()
    with Footprint() as seen:
        out = fn(q, k, v, block_size, **inputs.kwargs)
    if seen.largest > tile_budget(q, k, v, block_size):
        raise NotBlockwise(f"your code made a tensor of shape {seen.largest_shape}, more than block by block "
                           f"needs: at most one ({block_size}, {block_size}) tile of scores per (batch, head) "
                           "besides the inputs and the output")
    return out


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
FLASH_AXES = ladder(
    dict(batch=(1,), L=4, S=4, E=2, block_size=4, dtype="float64"),
    axis("one block of keys", "the step that combines blocks of keys (the running maximum, sum and output, rescaled when the maximum changes)",
         (dict(S=8), "two blocks of keys"), (dict(S=10), "a last, partial block of keys")),
    axis("one block of queries", "how blocks of queries are taken and written to the output",
         (dict(L=8), "two blocks of queries"), (dict(L=10), "a last, partial block of queries")),
    axis("no mask", "the causal mask inside the tiles (query i sees keys 0..i)",
         (dict(causal=True), "causal=True in one tile"), (dict(causal=True, L=8, S=8), "causal=True over 2 by 2 tiles"),
         (dict(causal=True, L=6, S=10), "causal=True with L=6 < S=10")),
    axis("one leading dim of 1", "how the leading dims (batch, heads) are kept apart",
         (dict(batch=(3,)), "a leading dim of 3"), (dict(batch=(2, 3)), "leading dims (2, 3)")),
    axis("values as wide as keys", "the values' width (Ev) against the keys' (E)", (dict(Ev=3), "values of width 3")),
    axis("scores of order 1", "the maximum subtracted before exp",
         (dict(S=8, std=20.0), "two blocks of keys with scores in the hundreds")),
)

check_flash_attention = declare(Check(
    name="flash_attention", assignment="09-attention-at-scale",
    axes=FLASH_AXES,
    defaults=dict(batch=(2, 2), L=20, S=None, E=4, Ev=None, block_size=8, causal=False, dtype="float32",
                  std=1.0, memory_mib=None),
    inputs=_flash_inputs, call=_flash_call, describe=_flash_describe, forbidden=FORBIDDEN_SDPA,
))


# --------------------------------------------------------------------------
# KVCache


def _cache_inputs(c: Spec, gen: torch.Generator) -> Inputs:
    dtype, B, H, E = as_dtype(c["dtype"]), c["batch"], c["heads"], c["E"]
    chunks = {}
    for i, t in enumerate(c["steps"]):
        chunks[f"k{i}"] = randn(B, H, t, E, gen=gen, dtype=dtype)  # (B, H, t, E)
        chunks[f"v{i}"] = randn(B, H, t, E, gen=gen, dtype=dtype)
    return Inputs(chunks, note=f"(updates of {', '.join(map(str, c['steps']))} positions)")


def _cache_call(cls: Any, inputs: Inputs, spec: Spec) -> Any:
    cache = cls()
    lengths, keys, values = [len(cache)], [], []
    for i in range(len(spec["steps"])):
        k_all, v_all = cache.update(inputs.args[f"k{i}"], inputs.args[f"v{i}"])
        keys.append(k_all)
        values.append(v_all)
        lengths.append(len(cache))
    # every update's answer, one after the other along the positions
    return torch.cat(keys, dim=-2), torch.cat(values, dim=-2), [int(n) for n in lengths]


def _cache_describe(inputs: Inputs, spec: Spec) -> str:
    k0 = inputs.args["k0"]
    return (f"keys and values (B={k0.shape[0]}, H={k0.shape[1]}, t, E={k0.shape[-1]}) {inputs.note}; "
            f"{str(k0.dtype).removeprefix('torch.')} on <device>")


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
CACHE_AXES = ladder(
    dict(batch=1, heads=1, E=2, steps=(2,), dtype="float64"),
    axis("one update", "what an update does to what the cache holds", (dict(steps=(2, 1)), "a second update"),
         (dict(steps=(2, 1, 3)), "a third update")),
    axis("an update of 2 positions", "the axis of the positions", (dict(steps=(1,)), "an update of one position")),
    axis("one head", "the axes other than the positions", (dict(heads=3, steps=(2, 1)), "3 heads, two updates")),
    axis("a batch of one", "the axes other than the positions", (dict(batch=2, steps=(2, 1)), "a batch of 2, two updates")),
)

check_kv_cache = declare(Check(
    name="KVCache", assignment="09-attention-at-scale",
    axes=CACHE_AXES,
    defaults=dict(batch=2, heads=2, E=4, steps=(3, 1, 2), dtype="float32"),
    inputs=_cache_inputs, outputs=("keys", "values", "lengths"), call=_cache_call, describe=_cache_describe,
    kind="class",
))


# --------------------------------------------------------------------------
# GroupedQueryAttention


GQA_NAMES = "w_q, w_k, w_v, w_o"
GQA_DEFAULTS = dict(batch=2, L=5, d_model=8, num_heads=4, num_kv_heads=2, dtype="float32")


def gqa_state(c: Spec, gen: torch.Generator, dtype: torch.dtype) -> dict[str, Tensor]:
    """Random weights of the four projections, as nn.Linear(..., bias=False) holds them (out, in)."""
    d, kv = c["d_model"], c["num_kv_heads"] * (c["d_model"] // c["num_heads"])
    shapes = dict(w_q=(d, d), w_k=(kv, d), w_v=(kv, d), w_o=(d, d))
    return {f"{name}.weight": randn(*shape, gen=gen, dtype=dtype, std=d ** -0.5) for name, shape in shapes.items()}


def _gqa_inputs(c: Spec, gen: torch.Generator) -> Inputs:
    dtype = as_dtype(c["dtype"])
    if c["d_model"] % c["num_heads"] or c["num_heads"] % c["num_kv_heads"]:
        raise ValueError("d_model must be a multiple of num_heads, num_heads of num_kv_heads")
    L = sum(c["steps"]) if "steps" in c else c["L"]
    x = randn(c["batch"], L, c["d_model"], gen=gen, dtype=dtype)  # (B, L, d_model)
    init = (c["d_model"], c["num_heads"], c["num_kv_heads"])
    note = f"({c['num_heads']} query heads, {c['num_kv_heads']} key/value heads"
    note += f"; chunks of {', '.join(map(str, c['steps']))} tokens)" if "steps" in c else ")"
    return Inputs(dict(x=x), extra=dict(init=init, state=gqa_state(c, gen, dtype)), note=note)


def _loaded_module(cls: Any, inputs: Inputs):
    module = build_student_module(cls, inputs.extra["init"])
    what = cls.__name__ if isinstance(cls, type) else "module"
    return load_student_module(module, inputs.extra["state"], what, GQA_NAMES)


def _gqa_call(cls: Any, inputs: Inputs, spec: Spec) -> Any:
    return _loaded_module(cls, inputs)(inputs.args["x"])


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
GQA_STEPS = (("w_q", "the query projection"), ("w_k", "the key projection"), ("w_v", "the value projection"),
             ("w_o", "the output projection"))
GQA_AXES = ladder(
    dict(batch=1, L=3, d_model=4, num_heads=2, num_kv_heads=2, dtype="float64"),
    axis("as many key/value heads as query heads", "which key/value head each query head reads (head h reads h // (num_heads // num_kv_heads))",
         (dict(num_kv_heads=1), "one key/value head for 2 query heads"),
         (dict(d_model=8, num_heads=4), "4 query heads sharing 2 key/value heads")),
    axis("2 heads", "how the heads are split and merged", (dict(num_heads=1, num_kv_heads=1), "one head"), downward=True),
    axis("3 positions", MORE_THAN_ONE_TOKEN, (dict(L=1), "one position (its weight is 1)"), downward=True),
    axis("a batch of one", "how the batch is kept apart from the heads", (dict(batch=2), "a batch of 2")),
    steps=GQA_STEPS,
)

check_grouped_query_attention = declare(Check(
    name="GroupedQueryAttention", assignment="09-attention-at-scale", defaults=GQA_DEFAULTS,
    axes=GQA_AXES,
    inputs=_gqa_inputs, call=_gqa_call, kind="class", forbidden=FORBIDDEN_SDPA,
))


# --------------------------------------------------------------------------
# cached decoding: the same module, fed chunk by chunk with a cache


class GivenKVCache:
    """The cache the cached_decoding check hands the student's module: a *static* cache, made for
    the updates it will get (``chunks``: how many positions each brings, in order; the check knows
    them, as a serving engine knows the requests it preallocates for) and sized for all of them at
    once, whose update writes the new positions into place and returns views of those filled so
    far, (B, kv heads, positions, head_dim); ``keys`` and ``values`` are None while empty. An update
    of another size than the next chunk raises: it is not a cache for updates nobody announced, so
    it is no answer to KVCache (made without arguments, grown by any update), even given a default
    (issue 58). The check depends on the student's module only."""

    def __init__(self, chunks: tuple[int, ...]):
        self.chunks = tuple(int(t) for t in chunks)
        self.max_positions, self.filled, self.updates = sum(self.chunks), 0, 0
        self._keys = self._values = None  # (B, kv heads, max_positions, head_dim), made at the first update

    def __len__(self):
        return self.filled

    @property
    def keys(self):
        return None if self._keys is None else self._keys[..., :self.filled, :]

    @property
    def values(self):
        return None if self._values is None else self._values[..., :self.filled, :]

    def update(self, k, v):
        if self.updates == len(self.chunks) or k.shape[-2] != self.chunks[self.updates]:
            expected = ("no update" if self.updates == len(self.chunks)
                        else f"keys (B, kv heads, {self.chunks[self.updates]}, head_dim)")
            raise ValueError(f"the course's cache was made for updates of {', '.join(map(str, self.chunks))} "
                             f"positions, one per call of your module; update {self.updates + 1} got keys of "
                             f"shape {tuple(k.shape)}, expected {expected}: call cache.update once per "
                             "forward, with the keys and values of that call's tokens")
        self.updates += 1
        if self._keys is None:
            B, H, _, d = k.shape
            self._keys = k.new_zeros(B, H, self.max_positions, d)
            self._values = v.new_zeros(B, H, self.max_positions, v.shape[-1])
        end = self.filled + k.shape[-2]
        self._keys[..., self.filled:end, :] = k
        self._values[..., self.filled:end, :] = v
        self.filled = end
        return self.keys, self.values


def _decoding_call(cls: Any, inputs: Inputs, spec: Spec) -> Any:
    module, x = _loaded_module(cls, inputs), inputs.args["x"]
    cache = GivenKVCache(chunks=spec["steps"])
    outputs, start = [], 0
    for t in spec["steps"]:
        outputs.append(module(x[:, start:start + t], cache))  # (B, t, d_model)
        start += t
    return torch.cat(outputs, dim=1), cache.keys


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
DECODING_AXES = ladder(
    dict(batch=1, d_model=4, num_heads=2, num_kv_heads=1, steps=(2,), dtype="float64"),
    axis("one chunk", "how a chunk attends to the positions already cached (its queries' positions start at the cached length)", (dict(steps=(2, 1)), "a second chunk of one token"),
         (dict(steps=(2, 1, 2)), "a third chunk of 2 tokens")),
    axis("a chunk of 2 tokens", "the causal mask within a chunk", (dict(steps=(1,)), "a chunk of one token"), downward=True),
    axis("one key/value head", "which key/value heads are cached and read",
         (dict(d_model=8, num_heads=4, num_kv_heads=2, steps=(2, 1)), "4 query heads sharing 2 key/value heads, two chunks")),
    steps=GQA_STEPS,
)

check_cached_decoding = declare(Check(
    name="cached_decoding", assignment="09-attention-at-scale", defaults=dict(GQA_DEFAULTS, steps=(3, 1, 2)),
    axes=DECODING_AXES,
    inputs=_gqa_inputs, outputs=("output", "cached_keys"), call=_decoding_call, kind="class",
    forbidden=FORBIDDEN_SDPA,
))
