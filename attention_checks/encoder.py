"""Checks for assignment 06-encoder: LayerNorm, positional_encoding, FeedForward,
EncoderLayer and Encoder (inputs and calls only; judged by attention_checks.answers.encoder).

A case is a small dict; every key is optional:

    LayerNorm:           batch=(2,), L=5, E=8, dims=1, as_tuple=False, eps=1e-5, mean=0.0, std=1.0,
                         init=False, dtype="float32", seed
        The module is LayerNorm(normalized_shape, eps) with normalized_shape = E when dims == 1
        (as_tuple: (E,)), else the tuple of the last `dims` sizes of x (*batch, L, E). Its weight
        and bias are loaded from a random state dict, or with init=True left as constructed.
        x has the given mean and std (a small std makes eps matter).
    positional_encoding: max_len=10, d_model=8
    FeedForward:         batch=(2,), L=5, E=8, F=32, dropout=0.1, train=False, dtype="float32", seed
        train=True runs the module in training mode (use it with dropout=0.0).
    EncoderLayer:        batch=2, L=5, E=8, nhead=2, F=16, dropout=0.1,
                         src_mask=None | "causal" | "random", padding=False, dtype="float32", seed
    Encoder:             the EncoderLayer keys and num_layers=2

`batch` is a tuple of leading dims for LayerNorm and FeedForward, and the batch size B of the
(B, L, E) input for the encoder classes. src_mask is a boolean (L, L) mask, True = not allowed
(causal: above the diagonal; random: any, but every row keeps key 0 and masks another key);
padding=True gives every sequence a length in [1, L - 1] and passes src_key_padding_mask
(B, L), True at the padding. Outputs at padded positions are not compared.

Modules are checked as PyTorch's: the student's class is built with the case's arguments,
moved to the device and dtype of the input, given the weights of the PyTorch module (a random
state dict, different for every layer of a stack) with load_state_dict, put in eval mode (unless
train=True) and called; the reference is the PyTorch module itself, in float64 on the CPU.
Encoder gets a layer from this module (GivenEncoderLayer, pre-norm: not the post-norm layer the
assignment asks for), so that its check depends on the student's Encoder only.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch
import torch.nn as nn
import torch.nn.functional as F

from .cases import Inputs, Spec
from .core import as_dtype, describe, randn
from .modules import (State, call_fresh, call_twice_if_random, fresh_rng, hide_padding, load_weights, marker,
                      to_module, watch_modules)
from .localise import MORE_THAN_ONE_TOKEN, axis, ladder
from .registry import Check, declare

Tensor = torch.Tensor

# --------------------------------------------------------------------------
# forbidden APIs, functions and modules

USES_LAYER_NORM = marker("nn.LayerNorm")
USES_ENCODER_LAYER = marker("nn.TransformerEncoderLayer")
USES_ENCODER = marker("nn.TransformerEncoder")
USES_GIVEN_LAYER = marker("GivenEncoderLayer")

# Display names end with the identifier a student's source would use: the grader also scans
# the source for that last component (autograder.grading.scanner).
FORBIDDEN_LAYER_NORM = {
    F.layer_norm: "F.layer_norm",
    torch.layer_norm: "F.layer_norm",
    "aten::layer_norm": "F.layer_norm",
    torch.native_layer_norm: "torch.native_layer_norm",
    "aten::native_layer_norm": "torch.native_layer_norm",
    USES_LAYER_NORM: "nn.LayerNorm",
    nn.LayerNorm: "nn.LayerNorm",  # its methods, borrowed by any class
}
FORBIDDEN_ENCODER = {
    torch._transformer_encoder_layer_fwd: "torch._transformer_encoder_layer_fwd",
    "aten::_transformer_encoder_layer_fwd": "torch._transformer_encoder_layer_fwd",
    USES_ENCODER_LAYER: "nn.TransformerEncoderLayer",
    USES_ENCODER: "nn.TransformerEncoder",
    nn.TransformerEncoderLayer: "nn.TransformerEncoderLayer",  # their methods, borrowed by any class
    nn.TransformerEncoder: "nn.TransformerEncoder",
}
# module classes (subclasses included) -> marker
_LAYER_NORM_MODULES = {nn.LayerNorm: USES_LAYER_NORM}
_ENCODER_MODULES = {nn.TransformerEncoderLayer: USES_ENCODER_LAYER, nn.TransformerEncoder: USES_ENCODER}


# --------------------------------------------------------------------------
# LayerNorm


def _layer_norm_inputs(c: Spec, gen: torch.Generator) -> Inputs:
    dtype, batch, dims, eps = as_dtype(c["dtype"]), tuple(c["batch"]), int(c["dims"]), float(c["eps"])
    x = randn(*batch, c["L"], c["E"], gen=gen, dtype=dtype, std=c["std"], mean=c["mean"])  # (*batch, L, E)
    if not 1 <= dims <= x.dim():
        raise ValueError(f"dims must be in 1..{x.dim()}")
    shape = tuple(x.shape[-dims:])
    normalized_shape: int | tuple[int, ...] = shape if dims > 1 or c["as_tuple"] else shape[0]
    weight = randn(*shape, gen=gen, dtype=dtype, std=0.5, mean=1.0)
    bias = randn(*shape, gen=gen, dtype=dtype, std=0.5)
    state = {} if c["init"] else dict(weight=weight, bias=bias)
    return Inputs(dict(x=x), extra=dict(normalized_shape=normalized_shape, eps=eps, state=state))


def _layer_norm_call(cls: Any, inputs: Inputs, spec: Spec) -> Any:
    x, e = inputs.args["x"], inputs.extra
    holder: list = []
    with fresh_rng(x.device), watch_modules(_LAYER_NORM_MODULES, holder), torch.no_grad():
        shape, eps = e["normalized_shape"], e["eps"]
        holder.append(cls(shape, eps=eps) if eps != 1e-5 else cls(shape))
        module = to_module(holder[0], "LayerNorm", x.device, x.dtype)
        if e["state"]:
            load_weights(module, e["state"], "LayerNorm", "nn.LayerNorm", "weight, bias")
        return module(x)


def _layer_norm_describe(inputs: Inputs, spec: Spec) -> str:
    e = inputs.extra
    args = f"{e['normalized_shape']!r}" + (f", eps={e['eps']:g}" if e["eps"] != 1e-5 else "")
    weights = "random weight and bias" if e["state"] else "its own initial weight and bias"
    return f"LayerNorm({args}) with {weights}, on {describe(inputs.args, like=inputs.like)}"


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
LAYER_NORM_AXES = ladder(
    dict(batch=(1,), L=2, E=3, dtype="float64"),
    axis("normalised over the last dim", "which dims you normalise over", (dict(dims=2), "the last 2 dims")),
    axis("normalized_shape an int", "normalized_shape given as a tuple", (dict(as_tuple=True), "normalized_shape=(E,)")),
    axis("inputs of mean 0, std 1", "the mean you subtract and the variance you divide by",
         (dict(mean=5.0), "inputs of mean 5"), (dict(std=10.0), "inputs of std 10")),
    axis("eps 1e-5", "where eps goes (inside the square root, added to the variance)", (dict(eps=0.5, std=0.5), "eps=0.5")),
    axis("loaded weights", "the weight and bias a new LayerNorm starts with (1 and 0)", (dict(init=True), "a new LayerNorm's own weights")),
)

check_layer_norm = declare(Check(
    name="LayerNorm", assignment="06-encoder", kind="class",
    axes=LAYER_NORM_AXES,
    defaults=dict(batch=(2,), L=5, E=8, dims=1, as_tuple=False, eps=1e-5, mean=0.0, std=1.0, init=False,
                  dtype="float32"),
    inputs=_layer_norm_inputs, call=_layer_norm_call, describe=_layer_norm_describe, forbidden=FORBIDDEN_LAYER_NORM,
))


# --------------------------------------------------------------------------
# positional_encoding: no tensor inputs, a float32 table on the CPU


def _pe_inputs(c: Spec, gen: torch.Generator) -> Inputs:
    if int(c["d_model"]) % 2:
        raise ValueError("d_model must be even")
    return Inputs(dict(max_len=int(c["max_len"]), d_model=int(c["d_model"])))


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
PE_AXES = ladder(
    dict(max_len=2, d_model=2),
    axis("positions 0, 1", "the angles: position times each pair's frequency", (dict(max_len=1), "position 0 alone"), downward=True),
    axis("one pair of features (d_model=2)", "the frequencies 10000^(-2i/d_model), one per pair", (dict(d_model=4), "d_model=4"),
         (dict(d_model=8), "d_model=8")),
    axis("positions 0, 1", "the positions (0 to max_len - 1)", (dict(max_len=6), "positions 0..5")),
)

check_positional_encoding = declare(Check(
    name="positional_encoding", assignment="06-encoder", defaults=dict(max_len=10, d_model=8),
    axes=PE_AXES,
    inputs=_pe_inputs, on_device=False,
))


# --------------------------------------------------------------------------
# random weights: inputs of the module checks


def _linear_state(prefix: str, n_in: int, n_out: int, gen: torch.Generator, dtype: torch.dtype) -> State:
    return {
        f"{prefix}.weight": randn(n_out, n_in, gen=gen, dtype=dtype, std=n_in**-0.5),  # (out, in), as nn.Linear
        f"{prefix}.bias": randn(n_out, gen=gen, dtype=dtype, std=0.3),
    }


def _ffn_state(E: int, F_: int, gen: torch.Generator, dtype: torch.dtype) -> State:
    return {**_linear_state("linear1", E, F_, gen, dtype), **_linear_state("linear2", F_, E, gen, dtype)}


def layer_state(E: int, F_: int, gen: torch.Generator, dtype: torch.dtype, prefix: str = "") -> State:
    """A random state dict of nn.TransformerEncoderLayer(E, nhead, F_): every weight and bias drawn,
    LayerNorm weights around 1."""
    state = {
        "self_attn.in_proj_weight": randn(3 * E, E, gen=gen, dtype=dtype, std=E**-0.5),  # (3E, E)
        "self_attn.in_proj_bias": randn(3 * E, gen=gen, dtype=dtype, std=0.3),
        "self_attn.out_proj.weight": randn(E, E, gen=gen, dtype=dtype, std=E**-0.5),
        "self_attn.out_proj.bias": randn(E, gen=gen, dtype=dtype, std=0.3),
        **_ffn_state(E, F_, gen, dtype),
        "norm1.weight": randn(E, gen=gen, dtype=dtype, std=0.3, mean=1.0),
        "norm1.bias": randn(E, gen=gen, dtype=dtype, std=0.3),
        "norm2.weight": randn(E, gen=gen, dtype=dtype, std=0.3, mean=1.0),
        "norm2.bias": randn(E, gen=gen, dtype=dtype, std=0.3),
    }
    return {prefix + k: v for k, v in state.items()}


# --------------------------------------------------------------------------
# FeedForward


def _ffn_inputs(c: Spec, gen: torch.Generator) -> Inputs:
    dtype, batch, E, F_ = as_dtype(c["dtype"]), tuple(c["batch"]), c["E"], c["F"]
    if c["train"] and c["dropout"]:
        raise ValueError("train=True needs dropout=0.0 (dropout is random)")
    x = randn(*batch, c["L"], E, gen=gen, dtype=dtype)  # (*batch, L, E)
    return Inputs(dict(x=x), extra=dict(state=_ffn_state(E, F_, gen, dtype)))


def _ffn_call(cls: Any, inputs: Inputs, spec: Spec) -> Any:
    x, dropout, train = inputs.args["x"], float(spec["dropout"]), bool(spec["train"])
    holder: list = []
    with fresh_rng(x.device), watch_modules({}, holder), torch.no_grad():
        holder.append(cls(spec["E"], spec["F"], dropout=dropout))
        module = to_module(holder[0], "FeedForward", x.device, x.dtype)
        load_weights(module, inputs.extra["state"], "FeedForward", "nn.TransformerEncoderLayer's feed-forward network",
                     "linear1 = nn.Linear(d_model, dim_feedforward), linear2 = nn.Linear(dim_feedforward, d_model)")
        module.train(train)
        return call_twice_if_random(module, lambda m: call_fresh(m, x), dropout, train, x.device)


def _ffn_describe(inputs: Inputs, spec: Spec) -> str:
    mode = "training mode" if spec["train"] else "eval mode"
    return (f"FeedForward({spec['E']}, {spec['F']}, dropout={float(spec['dropout']):g}) in {mode}, "
            f"on {describe(inputs.args, like=inputs.like)}")


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
FFN_AXES = ladder(
    dict(batch=(1,), L=3, E=3, F=4, dtype="float64"),
    axis("F=4", "the hidden width (linear1: E to F, linear2: F to E)", (dict(F=8), "F=8")),
    axis("E=3", "the model width", (dict(E=5), "E=5")),
    axis("one leading dim", "how the leading dims pass through", (dict(batch=(2, 3)), "leading dims (2, 3)")),
    steps=(("linear1", "the first layer"), ("linear2", "the second layer")),
)

check_feed_forward = declare(Check(
    name="FeedForward", assignment="06-encoder", kind="class",
    axes=FFN_AXES,
    defaults=dict(batch=(2,), L=5, E=8, F=32, dropout=0.1, train=False, dtype="float32"),
    inputs=_ffn_inputs, call=_ffn_call, describe=_ffn_describe,
))


# --------------------------------------------------------------------------
# EncoderLayer and Encoder

LAYER_DEFAULTS = dict(batch=2, L=5, E=8, nhead=2, F=16, dropout=0.1, src_mask=None, padding=False, dtype="float32")
LAYER_NAMES = "self_attn, linear1, linear2, norm1, norm2"


def _masks(c: Mapping[str, Any], gen: torch.Generator) -> tuple[Tensor | None, Tensor | None, str]:
    """(src_mask (L, L) or None, src_key_padding_mask (B, L) or None, description); True = not allowed."""
    B, L = int(c["batch"]), int(c["L"])
    src_mask, pad, what = None, None, []
    if c["src_mask"] == "causal":
        src_mask = torch.ones(L, L, dtype=torch.bool).triu(1)  # True above the diagonal
        what.append("causal src_mask")
    elif c["src_mask"] == "random":
        if L < 2:
            raise ValueError("a random src_mask needs L >= 2")
        src_mask = torch.rand(L, L, generator=gen, dtype=torch.float64) < 0.4
        other = 1 + torch.randint(L - 1, (L, 1), generator=gen)  # a key other than 0 for each row
        src_mask = src_mask.scatter(1, other, True)
        src_mask[:, 0] = False  # every query keeps key 0 (never padding)
        what.append("random src_mask")
    elif c["src_mask"] is not None:
        raise ValueError(f"src_mask must be None, 'causal' or 'random', not {c['src_mask']!r}")
    if c["padding"]:
        if L < 2:
            raise ValueError("padding needs L >= 2")
        lengths = 1 + torch.randint(L - 1, (B, 1), generator=gen)  # 1 .. L-1 real tokens
        pad = torch.arange(L)[None, :] >= lengths  # (B, L), True at the padding
        what.append("padding")
    return src_mask, pad, " and ".join(what)


def _stack_inputs(c: Spec, gen: torch.Generator, mask_names: tuple[str, str], layers: int | None) -> Inputs:
    """src, the masks under the module's own keyword names, and the state of one layer
    (layers=None) or of a stack of `layers`, each its own."""
    dtype = as_dtype(c["dtype"])
    B, L, E = int(c["batch"]), int(c["L"]), int(c["E"])
    if E % c["nhead"]:
        raise ValueError("E must be a multiple of nhead")
    src_mask, pad, what = _masks(c, gen)
    x = randn(B, L, E, gen=gen, dtype=dtype)  # (B, L, E)
    if layers is None:
        state = layer_state(E, c["F"], gen, dtype)
    else:
        state = {}
        for i in range(layers):  # every layer its own weights
            state.update(layer_state(E, c["F"], gen, dtype, prefix=f"layers.{i}."))
    kwargs = {name: m for name, m in zip(mask_names, (src_mask, pad)) if m is not None}
    return Inputs(dict(src=x), kwargs, extra=dict(state=state, pad=pad), note=f"({what})" if what else "")


def _run_stack_module(build: Any, inputs: Inputs, spec: Spec, what: str, like: str, names: str,
                      forbidden: Mapping[type, Any]) -> Any:
    x, pad = inputs.args["src"], inputs.extra["pad"]
    dropout = float(spec["dropout"])
    holder: list = []
    with fresh_rng(x.device), watch_modules(forbidden, holder), torch.no_grad():
        holder.append(build())
        module = to_module(holder[0], what, x.device, x.dtype)
        load_weights(module, inputs.extra["state"], what, like, names)
        module.eval()
        out = call_twice_if_random(module, lambda m: call_fresh(m, x, inputs.kwargs), dropout, False, x.device)
    return hide_padding(out, pad)


def _layer_call(cls: Any, inputs: Inputs, spec: Spec) -> Any:
    build = lambda: cls(spec["E"], spec["nhead"], spec["F"], float(spec["dropout"]))  # noqa: E731
    return _run_stack_module(build, inputs, spec, "EncoderLayer", "nn.TransformerEncoderLayer", LAYER_NAMES,
                             {**_ENCODER_MODULES, GivenEncoderLayer: USES_GIVEN_LAYER})


def _layer_describe(inputs: Inputs, spec: Spec) -> str:
    head = f"EncoderLayer({spec['E']}, {spec['nhead']}, {spec['F']}, {float(spec['dropout']):g}) in eval mode"
    return f"{head}, on {describe(inputs.named, like=inputs.like)}" + (f" {inputs.note}" if inputs.note else "")


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
ENCODER_LAYER_AXES = ladder(
    dict(batch=1, L=2, E=4, nhead=1, F=8, dtype="float64"),
    axis("2 positions", MORE_THAN_ONE_TOKEN, (dict(L=1), "one position (its weight is 1)"), downward=True),
    axis("one head", "how the heads are split and merged", (dict(nhead=2), "2 heads")),
    axis("no mask", "how src_mask is passed to the attention", (dict(L=3, src_mask="causal"), "a causal src_mask")),
    axis("no padding", "how src_key_padding_mask is passed to the attention", (dict(L=3, padding=True, batch=2), "padding")),
    axis("a batch of one", "how the batch is kept apart", (dict(batch=2), "a batch of 2")),
    steps=(("self_attn", "the self-attention"), ("norm1", "the first LayerNorm"), ("linear1", "the feed-forward's first layer"),
           ("linear2", "the feed-forward's second layer"), ("norm2", "the second LayerNorm")),
)

check_encoder_layer = declare(Check(
    name="EncoderLayer", assignment="06-encoder", kind="class", defaults=LAYER_DEFAULTS,
    axes=ENCODER_LAYER_AXES,
    inputs=lambda c, gen: _stack_inputs(c, gen, ("src_mask", "src_key_padding_mask"), None),
    call=_layer_call, describe=_layer_describe,
    forbidden={**FORBIDDEN_ENCODER, USES_GIVEN_LAYER: "GivenEncoderLayer"}, answers="encoder",
))


class GivenEncoderLayer(nn.Module):
    """The layer the Encoder check hands the student's Encoder: a correct *pre-norm* layer
    (x + Sublayer(LayerNorm(x))) with the parameter names of nn.TransformerEncoderLayer, so the
    check depends on the student's stack only. It is not the post-norm layer the assignment
    asks for: a grading kernel holds no answer to EncoderLayer."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, src: Tensor, src_mask: Tensor | None = None, src_key_padding_mask: Tensor | None = None):
        h = self.norm1(src)
        attn, _ = self.self_attn(h, h, h, attn_mask=src_mask, key_padding_mask=src_key_padding_mask,
                                 need_weights=False)  # (B, L, E)
        x = src + self.dropout1(attn)
        return x + self.dropout2(self.linear2(self.dropout(F.relu(self.linear1(self.norm2(x))))))


def _encoder_call(cls: Any, inputs: Inputs, spec: Spec) -> Any:
    n = int(spec["num_layers"])
    layer = lambda: GivenEncoderLayer(spec["E"], spec["nhead"], spec["F"], float(spec["dropout"]))  # noqa: E731
    return _run_stack_module(lambda: cls(layer(), n), inputs, spec, "Encoder", "nn.TransformerEncoder",
                             "self.layers, an nn.ModuleList of num_layers copies of the layer", _ENCODER_MODULES)


def _encoder_describe(inputs: Inputs, spec: Spec) -> str:
    layer = f"GivenEncoderLayer({spec['E']}, {spec['nhead']}, {spec['F']}, {float(spec['dropout']):g})"
    head = f"Encoder(layer, {spec['num_layers']}) with layer = {layer}, a pre-norm layer, in eval mode"
    return f"{head}, on {describe(inputs.named, like=inputs.like)}" + (f" {inputs.note}" if inputs.note else "")


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
ENCODER_AXES = ladder(
    dict(batch=1, L=2, E=4, nhead=1, F=8, num_layers=1, dtype="float64"),
    axis("one layer", "how layers are chained (each takes the previous one's output)", (dict(num_layers=2), "2 layers"),
         (dict(num_layers=3), "3 layers")),
    axis("no mask", "how the masks are handed to every layer", (dict(L=3, src_mask="causal"), "a causal src_mask"),
         (dict(L=3, padding=True, batch=2), "padding")),
    steps=(("layers.0", "the first layer"),),  # the base case has one layer: its input is the Encoder's, its output too
)

check_encoder = declare(Check(
    name="Encoder", assignment="06-encoder", kind="class", defaults=dict(LAYER_DEFAULTS, num_layers=2),
    axes=ENCODER_AXES,
    inputs=lambda c, gen: _stack_inputs(c, gen, ("mask", "src_key_padding_mask"), int(c["num_layers"])),
    call=_encoder_call, describe=_encoder_describe, forbidden=FORBIDDEN_ENCODER, answers="encoder",
))
