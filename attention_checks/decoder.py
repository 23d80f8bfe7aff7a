"""Checks for assignment 08-decoder: DecoderLayer, Decoder, Transformer, shift_right,
greedy_decode, and a short training run (inputs only; they are judged by
attention_checks.answers.decoder).

A case is a small dict; every key is optional:

    DecoderLayer:  batch=2, T=5, S=6, E=8, nhead=2, F=16, dropout=0.1,
                   tgt_mask=None | "causal" | "random", memory_mask=None | "random",
                   tgt_padding=False, src_padding=False, dtype="float32", seed
    Decoder:       the DecoderLayer keys, num_layers=2, norm=False (a final LayerNorm)
    Transformer:   the DecoderLayer keys, num_encoder_layers=1, num_decoder_layers=1,
                   src_mask=None | "random"
    shift_right:   batch=2, T=5, start_token=1, vocab=10, dtype="int64", seed
    greedy_decode: batch=2, S=5, max_len=6, start_token=1, vocab=7, dtype="int64", draw_seed=0, seed
    training:      batch=8, S=5, T=6, E=16, nhead=2, F=32, num_encoder_layers=1,
                   num_decoder_layers=1, vocab=11, steps=15, lr=0.5, src_padding=False, seed

T is the target's length, S the source's (the memory's). Masks are boolean, True = not
allowed: causal is True above the diagonal; a random mask never hides key 0. tgt_padding and
src_padding give each sequence a length in [1, T] (or [1, S]) and pass tgt_key_padding_mask
(B, T) and memory_key_padding_mask (B, S) (the Transformer also src_key_padding_mask). Outputs
at padded target positions are not compared (set to 0 on both sides).

Modules are checked as PyTorch's: the student's class is built with the case's arguments, given
the weights of the PyTorch module (random, every layer its own) with load_state_dict, put in eval
mode and called; the references are nn.TransformerDecoderLayer, nn.TransformerDecoder and
nn.Transformer (batch_first=True) in float64 on the CPU. Decoder gets a layer from this module
(GivenDecoderLayer, pre-norm: not the post-norm layer the assignment asks for, so that a grading
kernel holds no answer to DecoderLayer), so that its check depends on the student's Decoder only;
its reference is nn.TransformerDecoder of norm_first layers.
greedy_decode is run with ToyTranslator, a small fixed causal model; training builds a model
around the student's Transformer and records the loss of every step.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from .cases import Inputs, Spec
from .core import RESEED, as_dtype, randn
from .inputs import pad_mask, padding_lengths
from .modules import (build_student_module, hide_padding, load_student_module, marker as module_marker, seeded,
                      watch_modules)
from .localise import MORE_THAN_ONE_TOKEN, axis, ladder
from .registry import Check, declare
from .toy_models import ToyTranslator

Tensor = torch.Tensor

# --------------------------------------------------------------------------
# forbidden modules: PyTorch's decoder classes and nn.Transformer


_FORBIDDEN_MODULES = {  # class -> (marker, name shown; its last part is what the source scan looks for)
    cls: (module_marker(name), name) for cls, name in (
        (nn.TransformerDecoderLayer, "nn.TransformerDecoderLayer"),
        (nn.TransformerDecoder, "nn.TransformerDecoder"),
        (nn.Transformer, "nn.Transformer"),
    )
}
FORBIDDEN_DECODER = {
    **{marker: name for marker, name in _FORBIDDEN_MODULES.values()},
    **{cls: name for cls, (_, name) in _FORBIDDEN_MODULES.items()},  # their methods, borrowed by any class
}
_MODULE_MARKERS = {cls: marker for cls, (marker, _) in _FORBIDDEN_MODULES.items()}  # for watch_modules


# --------------------------------------------------------------------------
# inputs shared by the module checks


def random_state(module: nn.Module, gen: torch.Generator, dtype: torch.dtype) -> dict[str, Tensor]:
    """Random weights with the keys and shapes of ``module``'s state dict: matrices with std
    1/sqrt(fan-in), biases small, LayerNorm weights around 1 (every layer its own)."""
    state = {}
    for name, p in module.state_dict().items():
        if name.endswith("norm1.weight") or name.endswith("norm2.weight") or name.endswith("norm3.weight") \
                or name.endswith("norm.weight"):
            state[name] = (1 + randn(*p.shape, gen=gen, dtype=torch.float64, std=0.2)).to(dtype)
        elif p.dim() >= 2:
            state[name] = randn(*p.shape, gen=gen, dtype=dtype, std=p.shape[-1] ** -0.5)
        else:
            state[name] = randn(*p.shape, gen=gen, dtype=dtype, std=0.2)
    return state


def shapes_of(make) -> nn.Module:
    """A PyTorch module built only for its state dict's keys and shapes (the global RNG untouched)."""
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nn.Transformer warns about nested tensors with odd head counts
        return make()


def _mask(kind: str | None, rows: int, cols: int, gen: torch.Generator) -> Tensor | None:
    if kind is None:
        return None
    if kind == "causal":
        return torch.ones(rows, cols, dtype=torch.bool).triu(1)  # (rows, cols): True above the diagonal
    if kind == "random":
        mask = torch.rand(rows, cols, generator=gen, dtype=torch.float64) < 0.4
        mask[:, 0] = False  # every row keeps key 0: no row is all masked
        return mask
    raise ValueError(f"a mask is None, 'causal' or 'random', not {kind!r}")


def _lengths(spec: Spec, key: str, n: int, gen: torch.Generator) -> Tensor | None:
    return padding_lengths(spec["batch"], n, gen) if spec[key] else None


def decoder_inputs(c: Spec, gen: torch.Generator, dtype: torch.dtype) -> tuple[dict, dict, str]:
    """tgt, memory and the masks of a decoder case: (args, kwargs, note)."""
    B, T, S, E = c["batch"], c["T"], c["S"], c["E"]
    tgt = randn(B, T, E, gen=gen, dtype=dtype)  # (B, T, E)
    memory = randn(B, S, E, gen=gen, dtype=dtype)  # (B, S, E)
    kwargs: dict[str, Tensor] = {}
    notes = []
    for name, kind, rows, cols in (("tgt_mask", c["tgt_mask"], T, T), ("memory_mask", c["memory_mask"], T, S)):
        mask = _mask(kind, rows, cols, gen)
        if mask is not None:
            kwargs[name] = mask
            notes.append(f"{name} {kind}")
    for name, key, n in (("tgt_key_padding_mask", "tgt_padding", T), ("memory_key_padding_mask", "src_padding", S)):
        lengths = _lengths(c, key, n, gen)
        if lengths is not None:
            kwargs[name] = pad_mask(lengths, n)  # (B, n), True at padding
            notes.append(f"{'target' if key == 'tgt_padding' else 'source'} lengths "
                         f"{', '.join(map(str, lengths.tolist()))}")
    return dict(tgt=tgt, memory=memory), kwargs, f"({'; '.join(notes)})" if notes else ""


def _module_call(names: str):
    """Build the student's class, load the case's weights, eval mode, call, hide padded rows."""

    def call(cls: Any, inputs: Inputs, spec: Spec) -> Any:
        holder: list = []
        with watch_modules(_MODULE_MARKERS, holder):
            holder.append(build_student_module(cls, inputs.extra["init"], inputs.extra.get("options")))
            what = cls.__name__ if isinstance(cls, type) else "module"
            module = load_student_module(holder[0], inputs.extra["state"], what, names)
            out = module(*inputs.args.values(), **inputs.kwargs)
        return hide_padding(out, inputs.kwargs.get("tgt_key_padding_mask"))

    return call


LAYER_NAMES = "self_attn, multihead_attn, linear1, linear2, norm1, norm2, norm3"
LAYER_DEFAULTS = dict(batch=2, T=5, S=6, E=8, nhead=2, F=16, dropout=0.1, tgt_mask=None, memory_mask=None,
                      tgt_padding=False, src_padding=False, dtype="float32")


def torch_layer(c: Spec, norm_first: bool = False) -> nn.TransformerDecoderLayer:
    return nn.TransformerDecoderLayer(c["E"], c["nhead"], c["F"], c["dropout"], batch_first=True,
                                      norm_first=norm_first)


# --------------------------------------------------------------------------
# DecoderLayer


def _layer_inputs(c: Spec, gen: torch.Generator) -> Inputs:
    dtype = as_dtype(c["dtype"])
    args, kwargs, note = decoder_inputs(c, gen, dtype)
    state = random_state(shapes_of(lambda: torch_layer(c)), gen, dtype)
    return Inputs(args, kwargs, extra=dict(init=(c["E"], c["nhead"], c["F"], c["dropout"]), state=state), note=note)


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
DECODER_LAYER_AXES = ladder(
    dict(batch=1, T=2, S=2, E=4, nhead=1, F=8, dtype="float64"),
    axis("a target of 2", MORE_THAN_ONE_TOKEN, (dict(T=1), "a target of one position"), downward=True),
    axis("a memory of 2", "the cross-attention (queries from the target, keys and values from the memory)",
         (dict(S=3), "a memory of 3")),
    axis("one head", "how the heads are split and merged", (dict(nhead=2), "2 heads")),
    axis("no masks", "how tgt_mask is passed to the self-attention", (dict(T=3, tgt_mask="causal"), "a causal tgt_mask")),
    axis("no masks", "how memory_mask is passed to the cross-attention", (dict(T=3, memory_mask="random"), "a memory_mask")),
    axis("no padding", "how the padding masks are passed", (dict(batch=2, T=3, tgt_padding=True), "target padding"),
         (dict(batch=2, S=3, src_padding=True), "memory padding")),
    # (08's words name no LayerNorm: "norm" is a corpus mistake's hint here, tests/test_localise.py)
    steps=(("self_attn", "the self-attention"), ("multihead_attn", "the cross-attention"),
           ("linear1", "the feed-forward's first layer"), ("linear2", "the feed-forward's second layer")),
)

check_decoder_layer = declare(Check(
    name="DecoderLayer", assignment="08-decoder", defaults=LAYER_DEFAULTS,
    axes=DECODER_LAYER_AXES,
    inputs=_layer_inputs, kind="class", forbidden=FORBIDDEN_DECODER, call=_module_call(LAYER_NAMES),
))


# --------------------------------------------------------------------------
# Decoder


class GivenDecoderLayer(nn.Module):
    """The layer the Decoder check hands the student's Decoder: a correct *pre-norm* layer
    (x + Sublayer(LayerNorm(x)), as nn.TransformerDecoderLayer(norm_first=True)) with PyTorch's
    parameter names, so that the check depends on the student's stack only. It is not the
    post-norm layer the assignment asks for: a grading kernel holds no answer to DecoderLayer."""

    def __init__(self, d_model, nhead, dim_feedforward, dropout):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.multihead_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, **_):
        h = self.norm1(tgt)
        x = tgt + self.dropout(self.self_attn(h, h, h, attn_mask=tgt_mask, key_padding_mask=tgt_key_padding_mask)[0])
        h = self.norm2(x)
        x = x + self.dropout(self.multihead_attn(h, memory, memory, attn_mask=memory_mask,
                                                 key_padding_mask=memory_key_padding_mask)[0])
        return x + self.dropout(self.linear2(self.dropout(F.relu(self.linear1(self.norm3(x))))))


def torch_decoder(c: Spec, norm_first: bool = False) -> nn.TransformerDecoder:
    """nn.TransformerDecoder of the case; of pre-norm layers, as GivenDecoderLayer, with ``norm_first``."""
    norm = nn.LayerNorm(c["E"]) if c["norm"] else None
    return nn.TransformerDecoder(torch_layer(c, norm_first), c["num_layers"], norm=norm)


def _decoder_inputs(c: Spec, gen: torch.Generator) -> Inputs:
    dtype = as_dtype(c["dtype"])
    args, kwargs, note = decoder_inputs(c, gen, dtype)
    state = random_state(shapes_of(lambda: torch_decoder(c)), gen, dtype)
    layer = shapes_of(lambda: GivenDecoderLayer(c["E"], c["nhead"], c["F"], c["dropout"]))
    options = dict(norm=shapes_of(lambda: nn.LayerNorm(c["E"]))) if c["norm"] else {}
    note = f"({c['num_layers']} pre-norm layers{', a final norm' if c['norm'] else ''}" + (f"; {note[1:]}" if note else ")")
    return Inputs(args, kwargs, extra=dict(init=(layer, c["num_layers"]), options=options, state=state), note=note)


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
DECODER_AXES = ladder(
    dict(batch=1, T=2, S=2, E=4, nhead=1, F=8, num_layers=1, dtype="float64"),
    axis("one layer", "how layers are chained (each takes the previous one's output, and the encoder's output)",
         (dict(num_layers=2), "2 layers")),
    axis("no masks", "how the masks are handed to every layer", (dict(T=3, tgt_mask="causal"), "a causal tgt_mask"),
         (dict(batch=2, T=3, tgt_padding=True), "target padding")),
    steps=(("layers.0", "the first layer"),),  # the base case has one layer and no final norm
)

check_decoder = declare(Check(
    name="Decoder", assignment="08-decoder", defaults=dict(LAYER_DEFAULTS, num_layers=2, norm=False),
    axes=DECODER_AXES,
    inputs=_decoder_inputs, kind="class", forbidden=FORBIDDEN_DECODER,
    call=_module_call("layers (an nn.ModuleList of deep copies of the layer) and norm"),
))


# --------------------------------------------------------------------------
# Transformer


def torch_transformer(c: Spec) -> nn.Transformer:
    return nn.Transformer(c["E"], c["nhead"], c["num_encoder_layers"], c["num_decoder_layers"], c["F"],
                          c["dropout"], batch_first=True)


def _transformer_inputs(c: Spec, gen: torch.Generator) -> Inputs:
    dtype = as_dtype(c["dtype"])
    args, kwargs, note = decoder_inputs(c, gen, dtype)
    args = dict(src=args["memory"], tgt=args["tgt"])  # the memory's draw is the source now
    src_mask = _mask(c["src_mask"], c["S"], c["S"], gen)
    if src_mask is not None:
        kwargs["src_mask"] = src_mask
        note = f"(src_mask {c['src_mask']}" + (f"; {note[1:]}" if note else ")")
    if "memory_key_padding_mask" in kwargs:  # a model passes the source's padding to both
        kwargs["src_key_padding_mask"] = kwargs["memory_key_padding_mask"]
    state = random_state(shapes_of(lambda: torch_transformer(c)), gen, dtype)
    init = (c["E"], c["nhead"], c["num_encoder_layers"], c["num_decoder_layers"], c["F"], c["dropout"])
    note = f"({c['num_encoder_layers']} + {c['num_decoder_layers']} layers" + (f"; {note[1:]}" if note else ")")
    return Inputs(args, kwargs, extra=dict(init=init, state=state), note=note)


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
TRANSFORMER_AXES = ladder(
    dict(batch=1, T=2, S=2, E=4, nhead=1, F=8, dtype="float64"),
    axis("one layer each", "how the encoder's output reaches the decoder", (dict(num_encoder_layers=2), "2 encoder layers"),
         (dict(num_decoder_layers=2), "2 decoder layers")),
    axis("no masks", "which mask goes where (src_mask to the encoder, tgt_mask to the decoder)",
         (dict(T=3, tgt_mask="causal"), "a causal tgt_mask"), (dict(S=3, src_mask="random"), "a src_mask")),
    axis("no padding", "which padding mask goes where", (dict(batch=2, S=3, src_padding=True), "source padding")),
    steps=(("encoder", "the encoder"), ("decoder", "the decoder")),
)

check_transformer = declare(Check(
    name="Transformer", assignment="08-decoder",
    axes=TRANSFORMER_AXES,
    defaults=dict(LAYER_DEFAULTS, num_encoder_layers=1, num_decoder_layers=1, src_mask=None),
    inputs=_transformer_inputs, kind="class", forbidden=FORBIDDEN_DECODER,
    call=_module_call("encoder (layers, norm) and decoder (layers, norm)"),
))


# --------------------------------------------------------------------------
# shift_right


def _token_dtype(name: str) -> torch.dtype:
    return {"int64": torch.int64, "int32": torch.int32}[name]


def _shift_inputs(c: Spec, gen: torch.Generator) -> Inputs:
    tgt = torch.randint(3, c["vocab"], (c["batch"], c["T"]), generator=gen).to(_token_dtype(c["dtype"]))
    return Inputs(dict(tgt=tgt, start_token=c["start_token"]))


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
SHIFT_AXES = ladder(
    dict(batch=1, T=2),
    axis("2 tokens", "what moves (every token one to the right, the last dropped)", (dict(T=1), "one token"), downward=True),
    axis("2 tokens", "what moves (every token one to the right, the last dropped)", (dict(T=5), "5 tokens")),
    axis("start token 1", "the start token you are given", (dict(start_token=3), "start_token=3")),
    axis("one sequence", "how the sequences are kept apart", (dict(batch=3), "3 sequences")),
    axis("int64", "the tokens' dtype", (dict(dtype="int32"), "int32 tokens")),
)

check_shift_right = declare(Check(
    name="shift_right", assignment="08-decoder",
    axes=SHIFT_AXES,
    defaults=dict(batch=2, T=5, start_token=1, vocab=10, dtype="int64"),
    inputs=_shift_inputs, on_device=False,
))


# --------------------------------------------------------------------------
# greedy_decode


def toy_state(vocab: int, S: int, T: int, gen: torch.Generator, D: int = 8) -> dict[str, Tensor]:
    draw = lambda *shape, std=1.0: randn(*shape, gen=gen, dtype=torch.float64, std=std)  # noqa: E731
    return dict(src_embed=draw(vocab, D), tgt_embed=draw(vocab, D), mix=draw(T + 1, T + 1, std=0.7),
                cross=draw(T + 1, S, std=S ** -0.5), out=draw(D, vocab, std=D ** -0.5))


def _greedy_inputs(c: Spec, gen: torch.Generator) -> Inputs:
    src = torch.randint(3, c["vocab"], (c["batch"], c["S"]), generator=gen).to(_token_dtype(c["dtype"]))
    state = toy_state(c["vocab"], c["S"], c["max_len"], gen)
    return Inputs(dict(model=None, src=src, start_token=c["start_token"], max_len=c["max_len"]),
                  extra=dict(state=state), note=f"(a fixed model, vocabulary {c['vocab']})")


def _greedy_call(fn: Any, inputs: Inputs, spec: Spec) -> Any:
    model = ToyTranslator(inputs.extra["state"]).eval()
    args = dict(inputs.args, model=model)
    # a decoder that samples (a bug) draws the same tokens at every grading, and the student's RNG is left alone;
    # a localising rung draws them from another seed (RESEED), to see whether the code draws at all
    with seeded(int(spec[RESEED])):
        return fn(*args.values())


def _greedy_describe(inputs: Inputs, spec: Spec) -> str:
    src = inputs.args["src"]
    return (f"src {tuple(src.shape)} {str(src.dtype).removeprefix('torch.')}, start_token={spec['start_token']}, "
            f"max_len={spec['max_len']} {inputs.note}")


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
GREEDY_AXES = ladder(
    dict(batch=1, S=2, max_len=2),
    axis("2 steps", "each step: the model on all tokens so far, the last position's most likely token",
         (dict(max_len=1), "one step"), downward=True),
    # the last rung draws the random numbers anew: right or wrong alike for code that draws none, it
    # tells whether the code draws any (judging.refuted_by_ladder)
    axis("2 steps", "each step: the model on all tokens so far, the last position's most likely token",
         (dict(max_len=5), "5 steps"), (dict(max_len=5, **{RESEED: 1}), "5 steps from another random seed")),
    axis("start token 1", "the start token you are given", (dict(start_token=3), "start_token=3")),
    axis("one sequence", "how the sequences are kept apart", (dict(batch=3), "3 sequences")),
)

check_greedy_decode = declare(Check(
    name="greedy_decode", assignment="08-decoder",
    axes=GREEDY_AXES,
    defaults={**dict(batch=2, S=5, max_len=6, start_token=1, vocab=7, dtype="int64"), RESEED: 0},
    inputs=_greedy_inputs, call=_greedy_call, describe=_greedy_describe, on_device=False,
))


# --------------------------------------------------------------------------
# training: does a model made of the student's Transformer learn as PyTorch's does?


class Seq2Seq(nn.Module):
    """Embeddings + positions, a Transformer (the student's or PyTorch's), an output layer."""

    def __init__(self, transformer: nn.Module, vocab: int, d_model: int, max_len: int = 16):
        super().__init__()
        self.transformer, self.d_model = transformer, d_model
        self.src_embed, self.tgt_embed = nn.Embedding(vocab, d_model), nn.Embedding(vocab, d_model)
        self.out = nn.Linear(d_model, vocab)
        position = torch.arange(max_len, dtype=torch.float64)[:, None]
        omega = torch.exp(-torch.arange(0, d_model, 2, dtype=torch.float64) * math.log(1e4) / d_model)
        self.register_buffer("pe", torch.stack([torch.sin(position * omega), torch.cos(position * omega)], -1)
                             .flatten(1), persistent=False)  # (max_len, d_model): sin, cos interleaved

    def forward(self, src, tgt_in, src_pad):
        embed = lambda e, ids: e(ids) * math.sqrt(self.d_model) + self.pe[: ids.shape[1]].to(e.weight.dtype)  # noqa: E731
        T = tgt_in.shape[1]
        h = self.transformer(embed(self.src_embed, src), embed(self.tgt_embed, tgt_in),
                             tgt_mask=torch.ones(T, T, dtype=torch.bool).triu(1),
                             src_key_padding_mask=src_pad, memory_key_padding_mask=src_pad)
        return self.out(h)  # (B, T, vocab)


def train_losses(model: Seq2Seq, src, tgt, start_token: int, steps: int, lr: float) -> Tensor:
    """Gradient descent on one fixed batch with teacher forcing; the loss of every step, (steps,).

    Plain SGD by hand: torch.optim's first optimiser imports torch._dynamo (a second of CPU in
    every grading kernel), and SGD keeps two runs that differ in the last bits close together."""
    tgt_in = torch.cat([torch.full_like(tgt[:, :1], start_token), tgt[:, :-1]], dim=1)  # shifted right
    src_pad = src == 0
    params = [p for p in model.parameters() if p.requires_grad]
    model.train()
    losses = []
    for _ in range(steps):
        logits = model(src, tgt_in, src_pad)  # (B, T, vocab)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        with torch.no_grad():
            for p, g in zip(params, grads):
                if g is not None:
                    p -= lr * g
        losses.append(loss.item())
    return torch.tensor(losses, dtype=torch.float64)


TRAINING_DEFAULTS = dict(batch=8, S=5, T=6, E=16, nhead=2, F=32, num_encoder_layers=1, num_decoder_layers=1,
                         vocab=11, steps=15, lr=0.5, src_padding=False)


def training_spec(c: Spec) -> Spec:
    return dict(c, dropout=0.0)  # training mode: dropout must be off for the runs to agree


def _training_inputs(c: Spec, gen: torch.Generator) -> Inputs:
    c = training_spec(c)
    B, S, T, V, E = c["batch"], c["S"], c["T"], c["vocab"], c["E"]
    src = torch.randint(3, V, (B, S), generator=gen)  # (B, S) ids; 0 is padding, 1 the start token
    if c["src_padding"]:
        src = src.masked_fill(pad_mask(padding_lengths(B, S, gen), S), 0)
    tgt = torch.randint(2, V, (B, T), generator=gen)  # (B, T)
    state = random_state(shapes_of(lambda: torch_transformer(c)), gen, torch.float64)
    around = dict(src_embed=randn(V, E, gen=gen, dtype=torch.float64, std=E ** -0.5),
                  tgt_embed=randn(V, E, gen=gen, dtype=torch.float64, std=E ** -0.5),
                  out_w=randn(V, E, gen=gen, dtype=torch.float64, std=E ** -0.5),
                  out_b=torch.zeros(V, dtype=torch.float64))
    init = (E, c["nhead"], c["num_encoder_layers"], c["num_decoder_layers"], c["F"], 0.0)
    note = (f"({c['num_encoder_layers']} + {c['num_decoder_layers']} layers, d_model {E}, {c['steps']} SGD steps, "
            f"lr {c['lr']:g}{', padded sources' if c['src_padding'] else ''})")
    # lr as a float32 tensor: the losses come back in float32 and are judged with float32's tolerance
    # (the curves must agree, not their last bits)
    return Inputs(dict(src=src, tgt=tgt), dict(lr=torch.tensor(c["lr"], dtype=torch.float32)),
                  extra=dict(init=init, state=state, around=around), note=note)


def build_seq2seq(transformer: nn.Module, around: dict[str, Tensor], vocab: int, d_model: int) -> Seq2Seq:
    model = Seq2Seq(transformer, vocab, d_model).to(torch.float64)
    with torch.no_grad():
        model.src_embed.weight.copy_(around["src_embed"])
        model.tgt_embed.weight.copy_(around["tgt_embed"])
        model.out.weight.copy_(around["out_w"])
        model.out.bias.copy_(around["out_b"])
    return model


def _training_call(cls: Any, inputs: Inputs, spec: Spec) -> Any:
    c = training_spec(spec)

    holder: list = []
    with watch_modules(_MODULE_MARKERS, holder):
        holder.append(build_student_module(cls, inputs.extra["init"]))
        what = cls.__name__ if isinstance(cls, type) else "module"
        module = load_student_module(holder[0], inputs.extra["state"], what,
                                     "encoder (layers, norm) and decoder (layers, norm)")
        model = build_seq2seq(module, inputs.extra["around"], c["vocab"], c["E"])
        with seeded(0):
            losses = train_losses(model, inputs.args["src"], inputs.args["tgt"], 1, c["steps"], c["lr"])
    return losses.to(torch.float32)


def _training_describe(inputs: Inputs, spec: Spec) -> str:
    return f"a model around your Transformer, src {tuple(inputs.args['src'].shape)}, " \
           f"tgt {tuple(inputs.args['tgt'].shape)} {inputs.note}"


check_training = declare(Check(
    name="training", assignment="08-decoder", defaults=TRAINING_DEFAULTS,
    inputs=_training_inputs, outputs=("losses",), call=_training_call, describe=_training_describe,
    kind="class", forbidden=FORBIDDEN_DECODER, on_device=False,
))
