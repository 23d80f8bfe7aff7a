"""What a case is: the inputs a check hands the student's code, built from the case's spec.

A case is a spec (its keys with their defaults: ``Spec``) and the ``Inputs`` built from it on the
CPU. The declaration of a graded name (``registry.Check``), the probe that runs the student's
code and the judge that compares its outputs all speak of cases in these terms; this module
imports nothing of theirs.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import torch

from .core import describe

Spec = dict[str, Any]


def _map_tensors(value: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, dict):
        return {k: _map_tensors(v, fn) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_map_tensors(v, fn) for v in value)
    return value


def _as_reference(t: torch.Tensor) -> torch.Tensor:
    """A CPU copy, float64 for floating tensors (bool and integer tensors keep their dtype)."""
    dtype = torch.float64 if t.is_floating_point() else t.dtype
    return t.detach().to("cpu", dtype, copy=True)


@dataclass(frozen=True)
class Inputs:
    """What one case hands to the student's code."""

    args: dict[str, Any]  # passed positionally, in this order
    kwargs: dict[str, Any] = field(default_factory=dict)  # passed by name
    extra: dict[str, Any] = field(default_factory=dict)  # what `call` uses besides (constructor args, state dicts)
    note: str = ""  # added to the description, e.g. "(lengths 3, 5)"

    def to(self, device: torch.device) -> "Inputs":
        move = lambda t: t.to(device)  # noqa: E731
        return replace(self, args=_map_tensors(self.args, move), kwargs=_map_tensors(self.kwargs, move),
                       extra=_map_tensors(self.extra, move))

    def as_reference(self) -> "Inputs":
        """CPU float64 copies of every tensor: what references and mistakes are computed on."""
        return replace(self, args=_map_tensors(self.args, _as_reference),
                       kwargs=_map_tensors(self.kwargs, _as_reference), extra=_map_tensors(self.extra, _as_reference))

    @property
    def named(self) -> dict[str, Any]:
        return {**self.args, **self.kwargs}

    @property
    def like(self) -> torch.Tensor | None:
        """The input whose dtype and device the outputs must have: the first floating tensor, else the
        first tensor (token ids, boolean masks: the outputs follow their device)."""
        tensors = [v for v in self.named.values() if isinstance(v, torch.Tensor)]
        return next((t for t in tensors if t.is_floating_point()), tensors[0] if tensors else None)


def call_function(fn: Callable, inputs: Inputs, spec: Spec) -> Any:
    return fn(*inputs.args.values(), **inputs.kwargs)


def describe_inputs(inputs: Inputs, spec: Spec) -> str:
    text = describe(inputs.named, like=inputs.like, with_dtype=[k for k, v in inputs.named.items()
                                                              if isinstance(v, torch.Tensor) and not v.is_floating_point()])
    return text + (f" {inputs.note}" if inputs.note else "")


def snake_case(name: str) -> str:
    """LayerNorm -> layer_norm, LSTMAttentionPooling -> lstm_attention_pooling."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
