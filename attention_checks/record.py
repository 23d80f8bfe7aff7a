"""Outcomes of a check: recorded in the student's kernel, judged by the grader.

When the autograder runs a notebook it sets ``ATTENTION_CHECKS_RECORD=1``. Each check
then only displays what the student's code returned for each case (an *outcome*) as a
JSON output of its test cell, its *record*. The grader re-runs the test cell in its own
process, where each check takes the next record instead of calling student code, and
judges it against references computed there (autograder.grading.judge). So code in the student's
kernel can change what its functions return (which is their right), but never the verdict.
Records are data: decoded without pickle, anything malformed an error of its case.
"""
from __future__ import annotations

import base64
import numbers
import os
import re
from dataclasses import dataclass
from typing import Any, Sequence

import torch

MIME = "application/vnd.attention-checks.outcomes+json"
MAX_ELEMENTS = 1_000_000  # per recorded tensor; a bigger one is recorded as unreadable


@dataclass
class Outcome:
    """What the student's code did on one case: returned ``value``, or raised (``error``)."""

    value: Any = None
    error: str | None = None
    not_implemented: bool = False
    modified: tuple[str, ...] = ()  # the inputs the student's code changed in place
    # what the same case raised with every tensor on the meta device (CUDA's device rules, no data;
    # see probe.on_meta), or None: a GPU-free grader's view of a device bug. The grader decides what it means.
    meta_error: str | None = None


RECORD_VARIABLE = "ATTENTION_CHECKS_RECORD"  # set to "1" in every grading kernel's environment


def recording() -> bool:
    return os.environ.get(RECORD_VARIABLE) == "1"


def publish(check: str, outcomes: Sequence[Outcome], likes: Sequence[torch.Tensor], forbidden: Sequence[str],
            localising: dict | None = None) -> None:
    """Display the outcomes as this cell's record (only under the autograder); `localising`: the
    outcomes of the check's localising cases, as data (``localise.encode_ladder``)."""
    from IPython.display import display

    payload = {
        "check": check,
        "forbidden": list(forbidden),
        "outcomes": [_encode_outcome(o, like) for o, like in zip(outcomes, likes)],
    }
    if localising is not None:
        payload["localising"] = localising
    display({MIME: payload}, raw=True)


# --------------------------------------------------------------------------
# encoding: tensors keep dtype and shape (values as float64, exact for real dtypes),
# and whether they were on the input's device; other objects keep their type's name


def _encode_outcome(outcome: Outcome, like: torch.Tensor) -> dict:
    device = str(like.device) if like is not None else "cpu"
    if outcome.error is not None:  # the device too: the report names where the case crashed
        return {"error": outcome.error, "not_implemented": outcome.not_implemented, "modified": list(outcome.modified),
                "device": device}
    encoded = {"value": _encode(outcome.value, like), "device": device, "modified": list(outcome.modified)}
    if outcome.meta_error is not None:
        encoded["meta_error"] = outcome.meta_error[:2000]
    return encoded


def _encode(value: Any, like: torch.Tensor) -> Any:
    if isinstance(value, torch.Tensor):
        if value.is_complex() or value.numel() > MAX_ELEMENTS or value.device.type == "meta":
            return {"object": f"{type(value).__name__} that cannot be recorded"}
        data = value.detach().to("cpu", torch.float64).contiguous().numpy().tobytes()
        return {"tensor": {"dtype": str(value.dtype).removeprefix("torch."), "shape": list(value.shape),
                           "device": str(value.device), "data": base64.b64encode(data).decode()}}
    if isinstance(value, (tuple, list)):
        return {"sequence": [_encode(v, like) for v in value], "kind": type(value).__name__}
    if isinstance(value, bool) or value is None:
        return {"plain": value}
    if isinstance(value, str):
        return {"plain": value} if len(value) < 10_000 else {"object": "str"}
    if isinstance(value, numbers.Integral):  # int and numpy integers
        return {"plain": int(value)}
    if isinstance(value, numbers.Real):  # float and numpy floats; repr keeps nan and inf, which JSON cannot
        return {"float": repr(float(value))}
    return {"object": type(value).__name__}


def _device(name: Any) -> str | None:
    """A recorded device's name, if it is one that PyTorch knows ("cuda:0"); the report prints it,
    so nothing else (a made-up name could carry text)."""
    if not (isinstance(name, str) and re.fullmatch(r"[a-z]+(:\d{1,4})?", name)):
        return None
    try:
        torch.device(name)
    except (RuntimeError, ValueError):
        return None
    return name


def plain_number(x):
    """What a check records of a returned number: a Python int when it is integral, else a float
    (numpy scalars, one-element tensors, 1088.0 included), so that 1088.0 counts as the count 1088
    and np.float32(0.125) as the factor 0.125; anything else as it is (the report shows it)."""
    try:
        if isinstance(x, torch.Tensor):
            if x.numel() != 1 or x.is_complex():
                return x
            x = x.item()
        if isinstance(x, bool) or not isinstance(x, numbers.Real):
            return x
        return int(x) if float(x).is_integer() else float(x)
    except Exception:  # noqa: BLE001 - the student's object: recorded as it is
        return x


def decode_outcome(data: Any) -> tuple[Outcome, str | None]:
    """(outcome, the device the inputs were on); a malformed record decodes as an error."""
    try:
        modified = tuple(str(name) for name in data.get("modified", ()))
        if "error" in data:
            return Outcome(error=str(data["error"]), not_implemented=bool(data.get("not_implemented")),
                           modified=modified), _device(data.get("device"))
        meta_error = data.get("meta_error")
        return Outcome(_decode(data["value"]), modified=modified,
                       meta_error=None if meta_error is None else str(meta_error)), _device(data["device"])
    except Exception:  # noqa: BLE001 - anything malformed that came out of the kernel
        return Outcome(error="the recorded result could not be read"), None


class _Unreadable:
    """Stands for an object the student returned that was not recorded (its type's name)."""


def _decode(data: Any) -> Any:
    if "tensor" in data:
        t = data["tensor"]
        dtype = getattr(torch, t["dtype"])
        if not isinstance(dtype, torch.dtype):
            raise ValueError(t["dtype"])
        shape = [int(n) for n in t["shape"]]
        raw = base64.b64decode(t["data"])
        values = torch.frombuffer(bytearray(raw), dtype=torch.float64) if raw else torch.zeros(0, dtype=torch.float64)
        tensor = values.reshape(shape).to(dtype)
        device = _device(t["device"])
        if device is None:
            raise ValueError("not a device")
        tensor._recorded_device = device
        return tensor
    if "sequence" in data:
        items = [_decode(v) for v in data["sequence"]]
        return tuple(items) if data.get("kind") == "tuple" else items
    if "plain" in data:
        if not isinstance(data["plain"], (bool, int, str, type(None))):
            raise ValueError("not a plain value")
        return data["plain"]
    if "float" in data:
        return float(data["float"])
    name = str(data["object"])
    return type(name if name.isidentifier() else "object", (_Unreadable,), {})()


def device_name(tensor: torch.Tensor) -> str:
    """The device a tensor was on where the student's code ran."""
    return getattr(tensor, "_recorded_device", None) or str(tensor.device)
