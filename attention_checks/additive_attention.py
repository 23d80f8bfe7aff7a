"""Checks for assignment 07-additive-attention: AdditiveAttention and LSTMAttentionPooling
(inputs only; they are judged by attention_checks.answers.additive_attention).

A case is a small dict; every key is optional:

    AdditiveAttention:    B=2, L=3, S=5, query_size=6, key_size=4, value_size=3, hidden_size=8,
                          padding=False, scale=1.0 (multiplies queries and keys), dtype="float32", seed
    LSTMAttentionPooling: B=3, D=6, input_size=5, hidden_size=8, num_layers=1, num_heads=1,
                          score="dot" | "additive", padding=False, dtype="float32", seed

Both are classes: a case builds the student's class, loads the case's weights with
load_state_dict, moves it to the device and dtype of the inputs and calls it. The LSTM outputs
a pooling case hands over come from a real nn.LSTM run in float64 on the CPU; with
``padding=True`` the texts have different lengths and are packed with
pack_padded_sequence, so ``h_n`` is each text's state at its own last token and the padded
outputs are zeros.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn

from .cases import Inputs, Spec
from .core import as_dtype, randn
from .inputs import pad_mask, padding_lengths
from .modules import build_student_module, load_student_module
from .localise import axis, ladder
from .registry import Check, declare


def _state(shapes: dict[str, tuple[int, ...]], gen: torch.Generator, dtype: torch.dtype,
           gains: dict[str, float] | None = None) -> dict[str, torch.Tensor]:
    """Random weights, std gain/sqrt(fan-in) (gain 1.5 unless told): scores and pre-activations of
    order 1 or more, where tanh bends and the softmax is far from uniform (too small, and a known
    mistake would hide within the tolerance)."""
    gains = gains or {}
    return {name: randn(*shape, gen=gen, dtype=dtype, std=gains.get(name, 1.5) * shape[-1] ** -0.5)
            for name, shape in shapes.items()}


def _run_module(names: str):
    def call(cls: Any, inputs: Inputs, spec: Spec) -> Any:
        module = build_student_module(cls, inputs.extra["init"], inputs.extra["options"])
        module = load_student_module(module, inputs.extra["state"], cls.__name__ if isinstance(cls, type)
                                     else "module", names)
        return module(*inputs.args.values(), **inputs.kwargs)
    return call


# --------------------------------------------------------------------------
# AdditiveAttention


def _additive_inputs(c: Spec, gen: torch.Generator) -> Inputs:
    dtype, B, L, S = as_dtype(c["dtype"]), c["B"], c["L"], c["S"]
    dq, dk, dv, h = c["query_size"], c["key_size"], c["value_size"], c["hidden_size"]
    query = randn(B, L, dq, gen=gen, dtype=dtype, std=c["scale"])  # (B, L, dq)
    key = randn(B, S, dk, gen=gen, dtype=dtype, std=c["scale"])  # (B, S, dk)
    value = randn(B, S, dv, gen=gen, dtype=dtype)  # (B, S, dv)
    state = _state({"w_q.weight": (h, dq), "w_k.weight": (h, dk), "v.weight": (1, h)}, gen, dtype)
    kwargs, note = {}, ""
    if c["padding"]:
        lengths = padding_lengths(B, S, gen)
        kwargs["key_padding_mask"] = pad_mask(lengths, S)  # (B, S), True at padding
        note = f"(key lengths {', '.join(map(str, lengths.tolist()))})"
    return Inputs(dict(query=query, key=key, value=value), kwargs,
                  extra=dict(init=(dq, dk, h), options={}, state=state), note=note)


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
ADDITIVE_AXES = ladder(
    dict(B=1, L=1, S=2, query_size=2, key_size=2, value_size=2, hidden_size=2, dtype="float64"),
    axis("one query", "how the queries are kept apart (each its own weights over the keys)", (dict(L=3), "3 queries")),
    axis("2 keys", "the softmax over the keys", (dict(S=4), "4 keys")),
    axis("sizes of 2", "which projection goes with which input (queries, keys) and the values",
         (dict(query_size=3), "queries of size 3"), (dict(key_size=4), "keys of size 4"), (dict(value_size=5), "values of size 5")),
    axis("no padding", "how padded keys are masked", (dict(B=2, S=4, padding=True), "padded keys")),
)

check_additive_attention = declare(Check(
    name="AdditiveAttention", assignment="07-additive-attention",
    axes=ADDITIVE_AXES,
    defaults=dict(B=2, L=3, S=5, query_size=6, key_size=4, value_size=3, hidden_size=8, padding=False,
                  scale=1.0, dtype="float32"),
    inputs=_additive_inputs, outputs=("output", "weights"), kind="class",
    call=_run_module("w_q, w_k and v"),
))


# --------------------------------------------------------------------------
# LSTMAttentionPooling


def lstm_outputs(text: torch.Tensor, lengths: torch.Tensor | None, weights: list[torch.Tensor],
                 num_layers: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(outputs, h_n) of nn.LSTM(batch_first=True) with the given weights, in float64 on the CPU;
    with lengths, the batch is packed (padded outputs are zeros, h_n at each text's last token)."""
    B, D, input_size = text.shape
    hidden_size = weights[1].shape[1]
    with torch.random.fork_rng(devices=[]):  # the constructor draws weights we overwrite at once
        lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        for parameter, w in zip(lstm.parameters(), weights):
            parameter.copy_(w)
        if lengths is None:
            outputs, (h_n, _) = lstm(text)
        else:
            packed = nn.utils.rnn.pack_padded_sequence(text, lengths, batch_first=True, enforce_sorted=False)
            packed_out, (h_n, _) = lstm(packed)
            outputs, _ = nn.utils.rnn.pad_packed_sequence(packed_out, batch_first=True, total_length=D)
    return outputs, h_n  # (B, D, hidden), (num_layers, B, hidden)


def _pooling_inputs(c: Spec, gen: torch.Generator) -> Inputs:
    dtype, B, D, E, H = as_dtype(c["dtype"]), c["B"], c["D"], c["hidden_size"], c["num_heads"]
    if E % H or c["score"] not in ("dot", "additive"):
        raise ValueError("hidden_size must be a multiple of num_heads, score 'dot' or 'additive'")
    text = randn(B, D, c["input_size"], gen=gen, dtype=torch.float64)
    lstm_weights = []  # in nn.LSTM's order: per layer weight_ih, weight_hh, bias_ih, bias_hh
    for layer in range(c["num_layers"]):
        fan_in = c["input_size"] if layer == 0 else E
        for shape in ((4 * E, fan_in), (4 * E, E), (4 * E,), (4 * E,)):
            # large weights: outputs near +-1 rather than near 0, so that the query's origin shows
            lstm_weights.append(randn(*shape, gen=gen, dtype=torch.float64, std=2.0 * shape[-1] ** -0.5))
    lengths = padding_lengths(B, D, gen) if c["padding"] else None
    outputs, h_n = lstm_outputs(text, lengths, lstm_weights, c["num_layers"])
    shapes = {f"{name}.weight": (E, E) for name in ("w_q", "w_k", "w_v", "w_o")}
    if c["score"] == "additive":
        shapes["v"] = (H, E // H)
    state = _state(shapes, gen, dtype, gains={"w_q.weight": 4.0, "w_k.weight": 4.0, "v": 3.0})
    kwargs, note = {}, f"({c['num_layers']}-layer LSTM, {H} head{'s' * (H > 1)}, score={c['score']!r}"
    if lengths is not None:
        kwargs["key_padding_mask"] = pad_mask(lengths, D)  # (B, D), True at padding
        note += f", lengths {', '.join(map(str, lengths.tolist()))}"
    return Inputs(dict(outputs=outputs.to(dtype), h_n=h_n.to(dtype)), kwargs,
                  extra=dict(init=(E,), options=dict(num_heads=H, score=c["score"]), state=state),
                  note=note + ")")


# the ladder of small cases that localises a mistake by experiment (attention_checks.localise)
POOLING_AXES = ladder(
    dict(B=1, D=2, input_size=2, hidden_size=2, dtype="float64"),
    axis("one text", "how the texts are kept apart", (dict(B=3), "3 texts")),
    axis("no padding", "which states are a text's own (the padded ones are masked)", (dict(B=3, padding=True), "texts of different lengths")),
    axis("dot scores", "the additive score", (dict(score="additive"), "score='additive'")),
    axis("one head", "how the heads are split and merged", (dict(hidden_size=4, num_heads=2), "2 heads")),
    axis("one LSTM layer", "which layer's final state is the query", (dict(num_layers=2), "2 LSTM layers")),
)

check_lstm_attention_pooling = declare(Check(
    name="LSTMAttentionPooling", assignment="07-additive-attention",
    axes=POOLING_AXES,
    defaults=dict(B=3, D=6, input_size=5, hidden_size=8, num_layers=1, num_heads=1, score="dot", padding=False,
                  dtype="float32"),
    inputs=_pooling_inputs, outputs=("pooled", "weights"), kind="class",
    call=_run_module("w_q, w_k, w_v, w_o (and v for score='additive')"),
))
