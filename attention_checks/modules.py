"""Running a student's nn.Module as a check does: built without touching the student's
random numbers, given PyTorch's weights with load_state_dict (with a readable error when they
do not fit), in eval mode (where dropout must be off), and watched for PyTorch's own versions
of what the student was asked to write.

``marker(name)`` makes a do-nothing function that ``ForbiddenCalls`` sees when called: a
forbidden *module* (a submodule, a base class, one built inside forward) found by
``watch_modules`` is reported by calling its marker, so every forbidden use, function or
module, gets the same verdict.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Mapping, Sequence

import torch
import torch.nn as nn
from torch.overrides import handle_torch_function, has_torch_function

from .core import tolerance

Tensor = torch.Tensor
State = dict[str, Tensor]


def marker(name: str) -> Callable[[Tensor], Tensor]:
    def uses(t: Tensor) -> Tensor:
        if has_torch_function((t,)):
            return handle_torch_function(uses, (t,), t)
        return t

    uses.__name__ = uses.__qualname__ = f"uses_{name.replace('.', '_')}"
    return uses


@contextlib.contextmanager
def watch_modules(forbidden: Mapping[type, Callable], root_holder: list):
    """Report forbidden modules: those inside the student's module (root_holder[0] once built)
    and any whose forward runs meanwhile (e.g. built inside forward)."""
    seen: set[Callable] = set()

    def hook(module, args):
        for cls, mark in forbidden.items():
            if isinstance(module, cls):
                seen.add(mark)

    handle = nn.modules.module.register_module_forward_pre_hook(hook) if forbidden else None
    try:
        yield
    finally:
        if handle is not None:
            handle.remove()
        if root_holder and isinstance(root_holder[0], nn.Module):
            for sub in root_holder[0].modules():
                for cls, mark in forbidden.items():
                    if isinstance(sub, cls):
                        seen.add(mark)
        for mark in seen:
            mark(torch.empty(0))


class EvalModeError(RuntimeError):
    """The module's output changes between two calls in eval mode (dropout left on)."""


class WeightsDoNotFit(RuntimeError):
    """PyTorch's state dict does not load into the student's module."""


def fresh_rng(device: torch.device):
    """Constructing modules draws from the global RNG: leave the student's untouched."""
    return torch.random.fork_rng(devices=[device] if device.type == "cuda" else [])


def seed_rng(seed: int, device: torch.device):
    # inside fresh_rng: code that draws random numbers (dropout) gives the same outcome at every
    # grading, without touching the student's own RNG state
    torch.random.default_generator.manual_seed(seed)
    if device.type == "cuda":
        torch.cuda.manual_seed(seed)


def to_module(module: Any, what: str, device: torch.device, dtype: torch.dtype) -> nn.Module:
    if not isinstance(module, nn.Module):
        raise TypeError(f"{what}(...) gave a {type(module).__name__}: {what} must be a subclass of nn.Module "
                        "that calls super().__init__()")
    return module.to(device=device, dtype=dtype)


def _names(keys: Sequence[str], shown: int = 4) -> str:
    keys = list(keys)
    more = f" and {len(keys) - shown} more" if len(keys) > shown else ""
    return ", ".join(keys[:shown]) + more


def _mismatch(error: RuntimeError) -> str:
    """load_state_dict's size-mismatch error on one line."""
    return str(error).split("\n", 1)[-1].strip().replace("\n\t", "; ").replace("\t", "")


@contextlib.contextmanager
def seeded(seed: int):
    """Code inside draws the same random numbers at every grading, from PyTorch's global RNG forked
    and seeded here; the student's own CPU random state is left as it was."""
    with torch.random.fork_rng(devices=[]):
        if torch.cuda.is_available():
            torch.manual_seed(seed)  # the GPU's generators too, as code inside may draw there
        else:
            # torch.manual_seed would also queue a seed, with a stack trace, for each kind of device
            # this PyTorch knows and the machine lacks (230 µs a call, more under a deep stack)
            torch.random.default_generator.manual_seed(seed)
        yield


def build_student_module(cls, args: tuple = (), kwargs: dict | None = None, *, seed: int = 0):
    """cls(*args, **kwargs) without touching the student's random state: constructing a module
    draws its initial weights from the global RNG, seeded here (the same initial weights at every
    grading)."""
    with seeded(seed):
        return cls(*args, **(kwargs or {}))


def load_student_module(module, state: dict[str, torch.Tensor], what: str, names: str):
    """Move the student's module to the state's device and dtype, load ``state`` and switch to
    eval mode; a readable error when the names or shapes do not fit. Parameters of the
    student's that ``state`` lacks are allowed (they keep their seeded initial values)."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"{what}(...) gave a {type(module).__name__}: {what} must be a subclass of nn.Module "
                        "that calls super().__init__()")
    first = next(iter(state.values()))
    module = module.to(device=first.device, dtype=first.dtype)
    try:
        result = module.load_state_dict(state, strict=False)
    except RuntimeError as error:  # a size mismatch
        raise RuntimeError(f"the test's weights do not fit your {what} ({names}): {_mismatch(error)}") from None
    if result.unexpected_keys:
        raise RuntimeError(f"the test's weights do not load into your {what}: it lacks "
                           f"{', '.join(result.unexpected_keys)}; name its parameters {names}, as nn.Linear "
                           "submodules or nn.Parameter attributes")
    return module.eval()


def load_weights(module: nn.Module, state: State, what: str, like: str, names: str):
    """load_state_dict(state) into the student's module, with a readable error.
    Extra buffers of the student's are allowed; every parameter must be loaded."""
    own = dict(module.named_parameters())
    advice = f"name the submodules and parameters as {like} does ({names})"
    if not own:
        raise WeightsDoNotFit(
            f"your {what} has no parameters, so the weights of {like} cannot be loaded: {advice}. Weights must "
            "be nn.Parameter attributes (or those of submodules); modules kept in a Python list are invisible "
            "to PyTorch (use nn.ModuleList)."
        )
    try:
        result = module.load_state_dict(state, strict=False)
    except RuntimeError as error:  # a size mismatch
        raise WeightsDoNotFit(f"the weights of {like} do not fit your {what}: {_mismatch(error)}") from None
    missing = [k for k in result.missing_keys if k in own]  # the student's, not in PyTorch's
    unexpected = list(result.unexpected_keys)  # PyTorch's, not in the student's
    if missing or unexpected:
        parts = []
        if unexpected:
            parts.append(f"yours lacks {_names(unexpected)}")
        if missing:
            parts.append(f"{like} has no {_names(missing)}")
        raise WeightsDoNotFit(
            f"the weights of {like} do not load into your {what} ({'; '.join(parts)}): {advice}; weights must "
            "be nn.Parameter."
        )


def call_twice_if_random(module: nn.Module, call: Callable[[nn.Module], Any], dropout: float, train: bool,
                         device: torch.device) -> Any:
    """call(module); in eval mode with dropout > 0, a second call with other random numbers
    must give the same output. On the meta device (the device-bug run) there is nothing to
    compare, and a second call would only repeat the first one's device checks: once."""
    seed_rng(1, device)
    out = call(module)
    if dropout > 0 and not train and device.type != "meta":
        seed_rng(2, device)
        again = call(module)
        if isinstance(out, Tensor) and isinstance(again, Tensor) and out.shape == again.shape:
            tol = tolerance(out.dtype) if out.is_floating_point() else dict(rtol=0, atol=0)
            if not torch.allclose(out.detach(), again.detach(), equal_nan=True, **tol):
                raise EvalModeError(
                    "two calls in eval mode gave different outputs: dropout must be off in eval mode "
                    "(use nn.Dropout modules, or F.dropout(x, p, training=self.training))"
                )
    return out


def call_fresh(module: nn.Module, x: Tensor, kwargs: Mapping[str, Tensor] | None = None) -> Any:
    """module(x, **kwargs) on copies: code that changes its inputs in place must not change
    those of the next call."""
    return module(x.clone(), **{k: v.clone() for k, v in (kwargs or {}).items()})


def hide_padding(out: Any, pad: Tensor | None) -> Any:
    """Outputs at padded positions are not compared: zero them (in the student's output and
    in every reference) when the shape is right; anything else is returned as is."""
    if pad is None or not isinstance(out, Tensor) or tuple(out.shape[:2]) != tuple(pad.shape) or out.dim() != 3:
        return out
    return out.masked_fill(pad.to(out.device)[..., None], 0)
