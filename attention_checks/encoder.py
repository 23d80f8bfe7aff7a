"""Checks for assignment 06-encoder: LayerNorm, positional_encoding, FeedForward,
EncoderLayer and Encoder.

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
Encoder gets a correct layer from this module (ReferenceEncoderLayer), so that its check
depends on the student's Encoder only.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Mapping, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import handle_torch_function, has_torch_function

from .core import (
    Case,
    Mistake,
    as_dtype,
    built_once_in_grader,
    case_seed,
    describe,
    generator,
    pick_device,
    reference,
    run_check,
    tolerance,
    with_defaults,
)

Tensor = torch.Tensor
State = dict[str, Tensor]


# --------------------------------------------------------------------------
# forbidden APIs, functions and modules


def _module_marker(name: str) -> Callable[[Tensor], Tensor]:
    """A do-nothing function that a TorchFunctionMode sees when called (like F.* functions).

    ForbiddenCalls (core) records forbidden *function calls*; a forbidden *module* (a submodule,
    a base class, one built inside forward) is reported by calling its marker, so that the
    shared machinery gives the same verdict ("... calls nn.X ..., earns no points")."""

    def marker(t: Tensor) -> Tensor:
        if has_torch_function((t,)):
            return handle_torch_function(marker, (t,), t)
        return t

    marker.__name__ = marker.__qualname__ = f"uses_{name.replace('.', '_')}"
    return marker


USES_LAYER_NORM = _module_marker("nn.LayerNorm")
USES_ENCODER_LAYER = _module_marker("nn.TransformerEncoderLayer")
USES_ENCODER = _module_marker("nn.TransformerEncoder")

# Display names end with the identifier a student's source would use: the grader also scans
# the source for that last component (autograder.judge.SourceScanner).
FORBIDDEN_LAYER_NORM = {
    F.layer_norm: "F.layer_norm",
    torch.layer_norm: "F.layer_norm",
    "aten::layer_norm": "F.layer_norm",
    torch.native_layer_norm: "torch.native_layer_norm",
    "aten::native_layer_norm": "torch.native_layer_norm",
    USES_LAYER_NORM: "nn.LayerNorm",
}
FORBIDDEN_ENCODER = {
    torch._transformer_encoder_layer_fwd: "torch._transformer_encoder_layer_fwd",
    "aten::_transformer_encoder_layer_fwd": "torch._transformer_encoder_layer_fwd",
    USES_ENCODER_LAYER: "nn.TransformerEncoderLayer",
    USES_ENCODER: "nn.TransformerEncoder",
}
# module classes (subclasses included) -> marker
_LAYER_NORM_MODULES = {nn.LayerNorm: USES_LAYER_NORM}
_ENCODER_MODULES = {nn.TransformerEncoderLayer: USES_ENCODER_LAYER, nn.TransformerEncoder: USES_ENCODER}


@contextlib.contextmanager
def _watch_modules(forbidden: Mapping[type, Callable], root_holder: list):
    """Report forbidden modules: those inside the student's module (root_holder[0] once built)
    and any whose forward runs meanwhile (e.g. built inside forward)."""
    seen: set[Callable] = set()

    def hook(module, args):
        for cls, marker in forbidden.items():
            if isinstance(module, cls):
                seen.add(marker)

    handle = nn.modules.module.register_module_forward_pre_hook(hook) if forbidden else None
    try:
        yield
    finally:
        if handle is not None:
            handle.remove()
        if root_holder and isinstance(root_holder[0], nn.Module):
            for sub in root_holder[0].modules():
                for cls, marker in forbidden.items():
                    if isinstance(sub, cls):
                        seen.add(marker)
        for marker in seen:
            marker(torch.empty(0))


# --------------------------------------------------------------------------
# running a student's module


class EvalModeError(RuntimeError):
    """The module's output changes between two calls in eval mode (dropout left on)."""


class WeightsDoNotFit(RuntimeError):
    """PyTorch's state dict does not load into the student's module."""


def _fresh_rng(device: torch.device):
    # constructing modules draws from the global RNG: leave the student's untouched
    devices = [device] if device.type == "cuda" else []
    return torch.random.fork_rng(devices=devices)


def _to(module: Any, what: str, device: torch.device, dtype: torch.dtype) -> nn.Module:
    if not isinstance(module, nn.Module):
        raise TypeError(f"{what}(...) gave a {type(module).__name__}: {what} must be a subclass of nn.Module "
                        "that calls super().__init__()")
    return module.to(device=device, dtype=dtype)


def _names(keys: Sequence[str], shown: int = 4) -> str:
    keys = list(keys)
    more = f" and {len(keys) - shown} more" if len(keys) > shown else ""
    return ", ".join(keys[:shown]) + more


def _load(module: nn.Module, state: State, what: str, like: str, names: str):
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
        details = str(error).split("\n", 1)[-1].strip().replace("\n\t", "; ").replace("\t", "")
        raise WeightsDoNotFit(f"the weights of {like} do not fit your {what}: {details}") from None
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


def _seed(seed: int, device: torch.device):
    # inside _fresh_rng: makes code that draws random numbers (dropout) give the same outcome
    # at every grading, without touching the student's own RNG state
    torch.random.default_generator.manual_seed(seed)
    if device.type == "cuda":
        torch.cuda.manual_seed(seed)


def _call_twice_if_random(module: nn.Module, call: Callable[[nn.Module], Any], dropout: float, train: bool,
                          device: torch.device) -> Any:
    """call(module); in eval mode with dropout > 0, a second call with other random numbers
    must give the same output."""
    _seed(1, device)
    out = call(module)
    if dropout > 0 and not train:
        _seed(2, device)
        again = call(module)
        if isinstance(out, Tensor) and isinstance(again, Tensor) and out.shape == again.shape:
            tol = tolerance(out.dtype) if out.is_floating_point() else dict(rtol=0, atol=0)
            if not torch.allclose(out.detach(), again.detach(), equal_nan=True, **tol):
                raise EvalModeError(
                    "two calls in eval mode gave different outputs: dropout must be off in eval mode "
                    "(use nn.Dropout modules, or F.dropout(x, p, training=self.training))"
                )
    return out


def _call_fresh(module: nn.Module, x: Tensor, kwargs: Mapping[str, Tensor] | None = None) -> Any:
    """module(x, **kwargs) on copies: code that changes its inputs in place must not change
    those of the next call."""
    return module(x.clone(), **{k: v.clone() for k, v in (kwargs or {}).items()})


def _draw(shape: Sequence[int], gen: torch.Generator, dtype: torch.dtype, std: float = 1.0, mean: float = 0.0):
    # drawn in float64 so that a case gives the same numbers in every dtype
    return (torch.randn(tuple(shape), generator=gen, dtype=torch.float64) * std + mean).to(dtype)


def _as_reference(state: State) -> State:
    return {k: reference(v) for k, v in state.items()}


def _hide_padding(out: Any, pad: Tensor | None) -> Any:
    """Outputs at padded positions are not compared: zero them (in the student's output and
    in every reference) when the shape is right; anything else is returned as is."""
    if pad is None or not isinstance(out, Tensor) or tuple(out.shape[:2]) != tuple(pad.shape) or out.dim() != 3:
        return out
    return out.masked_fill(pad.to(out.device)[..., None], 0)


# --------------------------------------------------------------------------
# LayerNorm

LAYER_NORM_DEFAULTS = dict(
    batch=(2,), L=5, E=8, dims=1, as_tuple=False, eps=1e-5, mean=0.0, std=1.0, init=False, dtype="float32"
)


def _layer_norm(x: Tensor, dims: int, weight, bias, eps: float, *, correction: int = 0, eps_where: str = "inside",
                over: tuple[int, ...] | None = None) -> Tensor:
    over = tuple(range(-dims, 0)) if over is None else over
    mu = x.mean(over, keepdim=True)
    var = x.var(over, keepdim=True, correction=correction)
    if eps_where == "inside":
        xhat = (x - mu) / torch.sqrt(var + eps)
    elif eps_where == "outside":
        xhat = (x - mu) / (torch.sqrt(var) + eps)
    else:  # no eps
        xhat = (x - mu) / torch.sqrt(var)
    return xhat * weight + bias


def _layer_norm_mistakes(x: Tensor, dims: int, weight: Tensor, bias: Tensor, eps: float,
                         init: bool) -> dict[str, Mistake]:
    found: dict[str, Mistake] = {}

    def add(name, hint, out):
        found[name] = Mistake(hint, dict(output=out))

    n = x.shape[-dims:].numel()
    if n > 1:
        add("unbiased", "Your variance is the unbiased one (divided by n - 1, torch.var's and torch.std's "
            "default): LayerNorm uses the biased variance, divided by the number of features n "
            "(unbiased=False, or correction=0).", _layer_norm(x, dims, weight, bias, eps, correction=1))
        add("unbiased std + eps", "You divide by std + eps with the unbiased std: LayerNorm uses the biased "
            "variance (unbiased=False) and puts eps inside the square root, (x - mean) / sqrt(var + eps).",
            _layer_norm(x, dims, weight, bias, eps, correction=1, eps_where="outside"))
    add("eps outside", "eps belongs inside the square root: (x - mean) / sqrt(var + eps), "
        "not (x - mean) / (std + eps).", _layer_norm(x, dims, weight, bias, eps, eps_where="outside"))
    eps_hint = ("Your result ignores the eps given to the constructor: store it (self.eps) and divide by "
                "sqrt(var + self.eps).")
    add("no eps", eps_hint, _layer_norm(x, dims, weight, bias, eps, eps_where="none"))
    if eps != 1e-5:
        add("eps default", eps_hint, _layer_norm(x, dims, weight, bias, 1e-5))
    batch_dims = tuple(range(x.dim() - dims))
    if x.dim() > dims:
        axis_hint = ("You normalise over the wrong axis: LayerNorm normalises each token over its own features "
                     "(the last dims, normalized_shape), not each feature over the batch (that is batch "
                     "normalisation).")
        if x.shape[0] > 1:
            add("batch norm (batch)", axis_hint, _layer_norm(x, dims, weight, bias, eps, over=(0,)))
        if len(batch_dims) > 1:
            add("batch norm (all)", axis_hint, _layer_norm(x, dims, weight, bias, eps, over=batch_dims))
            add("positions", "You normalise over the positions (dim -2): LayerNorm normalises each token over "
                "its features, the last dim(s).", _layer_norm(x, dims, weight, bias, eps, over=(-2,)))
    if dims > 1:
        add("last dim only", f"With normalized_shape of {dims} dims, the mean and variance are taken over those "
            f"{dims} last dims together, not over the last dim alone.",
            _layer_norm(x, 1, weight, bias, eps))
    if init:
        plain = _layer_norm(x, dims, 1.0, 0.0, eps)
        add("init zeros", "A new LayerNorm starts with weight = ones and bias = zeros (as nn.LayerNorm).",
            torch.zeros_like(plain))
    else:
        add("no affine", "Your result ignores weight and bias: multiply the normalised x by weight, then add "
            "bias (they are parameters, loaded by load_state_dict).", _layer_norm(x, dims, 1.0, 0.0, eps))
        add("weight and bias swapped", "weight and bias are swapped: y = x̂ · weight + bias.",
            _layer_norm(x, dims, bias, weight, eps))
        add("no bias", "Your result ignores bias: y = x̂ · weight + bias.", _layer_norm(x, dims, weight, 0.0, eps))
    return found


@built_once_in_grader
def _layer_norm_case(spec: Mapping[str, Any], device: torch.device) -> Case:
    c = with_defaults(spec, LAYER_NORM_DEFAULTS)
    dtype, batch, dims, eps = as_dtype(c["dtype"]), tuple(c["batch"]), int(c["dims"]), float(c["eps"])
    gen = generator(case_seed(spec, "LayerNorm"))
    x = _draw((*batch, c["L"], c["E"]), gen, dtype, std=c["std"], mean=c["mean"])  # (*batch, L, E)
    if not 1 <= dims <= x.dim():
        raise ValueError(f"dims must be in 1..{x.dim()}")
    shape = tuple(x.shape[-dims:])
    normalized_shape: int | tuple[int, ...] = shape if dims > 1 or c["as_tuple"] else shape[0]
    weight = _draw(shape, gen, dtype, std=0.5, mean=1.0)
    bias = _draw(shape, gen, dtype, std=0.5)

    x64 = reference(x)
    if c["init"]:
        w64, b64, state = torch.ones(shape, dtype=torch.float64), torch.zeros(shape, dtype=torch.float64), None
    else:
        w64, b64, state = reference(weight), reference(bias), dict(weight=weight.to(device), bias=bias.to(device))
    torch_ln = nn.LayerNorm(shape, eps=eps, dtype=torch.float64)
    with torch.no_grad():
        torch_ln.weight.copy_(w64)
        torch_ln.bias.copy_(b64)
        expected = dict(output=torch_ln(x64))

    xd = x.to(device)

    def run(cls):
        holder: list = []
        with _fresh_rng(device), _watch_modules(_LAYER_NORM_MODULES, holder), torch.no_grad():
            holder.append(cls(normalized_shape, eps=eps) if eps != 1e-5 else cls(normalized_shape))
            module = _to(holder[0], "LayerNorm", device, dtype)
            if state is not None:
                _load(module, state, "LayerNorm", "nn.LayerNorm", "weight, bias")
            return module(xd)

    args = f"{normalized_shape!r}" + (f", eps={eps:g}" if eps != 1e-5 else "")
    weights = "its own initial weight and bias" if c["init"] else "random weight and bias"
    return Case(
        inputs=f"LayerNorm({args}) with {weights}, on {describe(dict(x=xd), like=xd)}",
        run=run,
        expected=expected,
        like=xd,
        mistakes=lambda: _layer_norm_mistakes(x64, dims, w64, b64, eps, c["init"]),
    )


def check_layer_norm(cls: Callable, *, points: float, cases: Sequence[Mapping[str, Any]],
                     device: torch.device | None = None):
    """Check the class LayerNorm(normalized_shape, eps=1e-5) against nn.LayerNorm; using
    nn.LayerNorm or F.layer_norm earns 0. See the module docstring for the cases."""
    __tracebackhide__ = True
    device = device or pick_device()
    return run_check("LayerNorm", cls, [_layer_norm_case(c, device) for c in cases], points=points,
                     forbidden=FORBIDDEN_LAYER_NORM)


# --------------------------------------------------------------------------
# positional_encoding

PE_DEFAULTS = dict(max_len=10, d_model=8)


def _sinusoids(max_len: int, d_model: int, *, exponent: Callable[[Tensor, Tensor], Tensor] | None = None,
               first: int = 0, layout: str = "interleaved", odd_own_index: bool = False,
               multiply: bool = False) -> Tensor:
    """The sinusoidal table in float64, or a known variant of it. Pair index i = 0..d/2-1."""
    pos = torch.arange(first, first + max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    i = torch.arange(d_model // 2, dtype=torch.float64)  # (d/2,)
    power = (2 * i / d_model) if exponent is None else exponent(i, torch.tensor(float(d_model), dtype=torch.float64))
    div = 10000.0**power  # (d/2,)
    angle = pos * div if multiply else pos / div  # (max_len, d/2)
    odd_angle = angle
    if odd_own_index:  # cos at feature 2i+1 with 10000^((2i+1)/d)
        odd_angle = pos / 10000.0 ** ((2 * i + 1) / d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    if layout == "interleaved":
        pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(odd_angle)
    elif layout == "swapped":
        pe[:, 0::2], pe[:, 1::2] = torch.cos(angle), torch.sin(angle)
    elif layout == "halves":
        pe[:, : d_model // 2], pe[:, d_model // 2:] = torch.sin(angle), torch.cos(angle)
    return pe


def positional_encoding_reference(max_len: int, d_model: int) -> Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d_model)); float64."""
    return _sinusoids(max_len, d_model)


def _pe_mistakes(max_len: int, d_model: int) -> dict[str, Mistake]:
    found: dict[str, Mistake] = {}

    def add(name, hint, out):
        found[name] = Mistake(hint, dict(output=out))

    add("swapped", "sin and cos are swapped: the sine goes to the even feature indices 0, 2, 4, ... and the "
        "cosine to the odd ones 1, 3, 5, ...", _sinusoids(max_len, d_model, layout="swapped"))
    add("halves", "You put the sines in the first half of the features and the cosines in the second half: "
        "interleave them, sine at even indices (pe[:, 0::2]) and cosine at odd indices (pe[:, 1::2]).",
        _sinusoids(max_len, d_model, layout="halves"))
    add("exponent i/d", "Wrong frequency exponent: features 2i and 2i+1 use pos / 10000^(2i/d_model), "
        "with i the index of the pair; you seem to use 10000^(i/d_model) (the factor 2 is missing).",
        _sinusoids(max_len, d_model, exponent=lambda i, d: i / d))
    add("exponent 2j/d", "Wrong frequency exponent: 2i in 10000^(2i/d_model) is the even feature index "
        "itself (i counts pairs); you seem to double the feature index, 10000^(2j/d_model).",
        _sinusoids(max_len, d_model, exponent=lambda i, d: 4 * i / d))
    add("exponent without d", "Wrong frequency exponent: it is 2i/d_model (between 0 and 1), "
        "not 2i: divide by d_model.", _sinusoids(max_len, d_model, exponent=lambda i, d: 2 * i))
    add("exponent i", "Wrong frequency exponent: it is 2i/d_model, not the pair index i itself.",
        _sinusoids(max_len, d_model, exponent=lambda i, d: i))
    add("odd own index", "The cosine at feature 2i+1 uses the same frequency as the sine at feature 2i, "
        "pos / 10000^(2i/d_model); you seem to use 10000^((2i+1)/d_model) for the odd features.",
        _sinusoids(max_len, d_model, odd_own_index=True))
    add("multiply", "The angle is pos / 10000^(2i/d_model): you multiply pos by 10000^(2i/d_model) instead "
        "of dividing (check the sign of the exponent).", _sinusoids(max_len, d_model, multiply=True))
    add("from 1", "Positions start at 0: row 0 is sin 0 = 0 at the even features and cos 0 = 1 at the odd ones.",
        _sinusoids(max_len, d_model, first=1))
    if max_len == d_model:
        add("transposed", "Your table is transposed: one row per position, shape (max_len, d_model).",
            _sinusoids(max_len, d_model).T.contiguous())
    return found


@built_once_in_grader
def _pe_case(spec: Mapping[str, Any], device: torch.device) -> Case:
    c = with_defaults(spec, PE_DEFAULTS)
    max_len, d_model = int(c["max_len"]), int(c["d_model"])
    if d_model % 2:
        raise ValueError("d_model must be even")
    like = torch.empty(0, dtype=torch.float32)  # float32 on the CPU: there is no input tensor
    return Case(
        inputs=f"max_len={max_len}, d_model={d_model}",
        run=lambda fn: fn(max_len, d_model),
        expected=dict(output=positional_encoding_reference(max_len, d_model)),
        like=like,
        mistakes=lambda: _pe_mistakes(max_len, d_model),
    )


def check_positional_encoding(fn: Callable, *, points: float, cases: Sequence[Mapping[str, Any]],
                              device: torch.device | None = None):
    """Check positional_encoding(max_len, d_model) -> (max_len, d_model) float32 on the CPU
    against the formula of the original Transformer."""
    __tracebackhide__ = True
    return run_check("positional_encoding", fn, [_pe_case(c, torch.device("cpu")) for c in cases], points=points)


# --------------------------------------------------------------------------
# float64 reference pieces for the feed-forward network and the encoder layer


def _ffn(p: State, x: Tensor, act: Callable = F.relu, relu_after: bool = False, prefix: str = "") -> Tensor:
    h = F.linear(x, p[prefix + "linear1.weight"], p[prefix + "linear1.bias"])  # (..., F)
    out = F.linear(act(h), p[prefix + "linear2.weight"], p[prefix + "linear2.bias"])  # (..., E)
    return F.relu(out) if relu_after else out


def _self_attention(p: State, nhead: int, x: Tensor, attn_mask: Tensor | None, kpm: Tensor | None) -> Tensor:
    """nn.MultiheadAttention(E, nhead, batch_first=True) self-attention, slow path, eval."""
    q = x.transpose(0, 1)  # (L, B, E)
    out, _ = F.multi_head_attention_forward(
        q, q, q, x.size(-1), nhead,
        p["self_attn.in_proj_weight"], p["self_attn.in_proj_bias"], None, None, False, 0.0,
        p["self_attn.out_proj.weight"], p["self_attn.out_proj.bias"],
        training=False, key_padding_mask=kpm, need_weights=False, attn_mask=attn_mask,
    )
    return out.transpose(0, 1)  # (B, L, E)


def _norm(p: State, name: str, x: Tensor) -> Tensor:
    return F.layer_norm(x, x.shape[-1:], p[f"{name}.weight"], p[f"{name}.bias"], eps=1e-5)


def encoder_layer_reference(p: State, nhead: int, x: Tensor, attn_mask: Tensor | None = None,
                            kpm: Tensor | None = None, **bug: Any) -> Tensor:
    """The post-norm encoder layer on float64 CPU tensors, or a known variant of it (bug=...)."""
    sa = lambda h: _self_attention(p, nhead, h, attn_mask, kpm)  # noqa: E731
    act = F.gelu if bug.get("gelu") else (lambda h: h) if bug.get("no_relu") else F.relu
    ff = lambda h: _ffn(p, h, act)  # noqa: E731
    n1, n2 = ("norm2", "norm1") if bug.get("norms_swapped") else ("norm1", "norm2")
    if bug.get("one_norm"):
        n2 = "norm1"
    if bug.get("pre_norm"):
        h = x + sa(_norm(p, n1, x))
        return h + ff(_norm(p, n2, h))
    if bug.get("norm_sublayer_only"):  # x + LN(sublayer(x))
        h = x + _norm(p, n1, sa(x))
        return h + _norm(p, n2, ff(h))
    h = _norm(p, n1, (0 if bug.get("no_residual_attn") else x) + sa(x))
    second = x if bug.get("residual_from_input") else 0 if bug.get("no_residual_ffn") else h
    return _norm(p, n2, second + ff(h))


# --------------------------------------------------------------------------
# FeedForward

FFN_DEFAULTS = dict(batch=(2,), L=5, E=8, F=32, dropout=0.1, train=False, dtype="float32")


def _linear_state(prefix: str, n_in: int, n_out: int, gen: torch.Generator, dtype: torch.dtype) -> State:
    return {
        f"{prefix}.weight": _draw((n_out, n_in), gen, dtype, std=n_in**-0.5),  # (out, in), as nn.Linear
        f"{prefix}.bias": _draw((n_out,), gen, dtype, std=0.3),
    }


def _ffn_state(E: int, F_: int, gen: torch.Generator, dtype: torch.dtype) -> State:
    return {**_linear_state("linear1", E, F_, gen, dtype), **_linear_state("linear2", F_, E, gen, dtype)}


def _ffn_mistakes(p: State, x: Tensor) -> dict[str, Mistake]:
    found: dict[str, Mistake] = {}

    def add(name, hint, out):
        found[name] = Mistake(hint, dict(output=out))

    add("no relu", "The ReLU is missing: FeedForward computes linear2(dropout(relu(linear1(x)))).",
        _ffn(p, x, lambda h: h))
    add("gelu", "The activation is a ReLU (torch.relu), not a GELU.", _ffn(p, x, F.gelu))
    add("relu after", "No activation after linear2: FeedForward computes linear2(dropout(relu(linear1(x)))); "
        "its output can be negative.", _ffn(p, x, relu_after=True))
    add("residual", "FeedForward returns linear2(...) only: the residual connection (x + ...) and the "
        "LayerNorm belong to the encoder layer.", x + _ffn(p, x))
    return found


@built_once_in_grader
def _ffn_case(spec: Mapping[str, Any], device: torch.device) -> Case:
    c = with_defaults(spec, FFN_DEFAULTS)
    dtype, batch, E, F_, dropout, train = (as_dtype(c["dtype"]), tuple(c["batch"]), c["E"], c["F"],
                                           float(c["dropout"]), bool(c["train"]))
    if train and dropout:
        raise ValueError("train=True needs dropout=0.0 (dropout is random)")
    gen = generator(case_seed(spec, "FeedForward"))
    x = _draw((*batch, c["L"], E), gen, dtype)  # (*batch, L, E)
    state = _ffn_state(E, F_, gen, dtype)
    x64, p64 = reference(x), _as_reference(state)
    expected = dict(output=_ffn(p64, x64))

    xd = x.to(device)
    state_d = {k: v.to(device) for k, v in state.items()}

    def run(cls):
        holder: list = []
        with _fresh_rng(device), _watch_modules({}, holder), torch.no_grad():
            holder.append(cls(E, F_, dropout=dropout))
            module = _to(holder[0], "FeedForward", device, dtype)
            _load(module, state_d, "FeedForward", "nn.TransformerEncoderLayer's feed-forward network",
                  "linear1 = nn.Linear(d_model, dim_feedforward), linear2 = nn.Linear(dim_feedforward, d_model)")
            module.train(train)
            return _call_twice_if_random(module, lambda m: _call_fresh(m, xd), dropout, train, device)

    mode = "training mode" if train else "eval mode"
    return Case(
        inputs=f"FeedForward({E}, {F_}, dropout={dropout:g}) in {mode}, on {describe(dict(x=xd), like=xd)}",
        run=run,
        expected=expected,
        like=xd,
        mistakes=lambda: _ffn_mistakes(p64, x64),
    )


def check_feed_forward(cls: Callable, *, points: float, cases: Sequence[Mapping[str, Any]],
                       device: torch.device | None = None):
    """Check the class FeedForward(d_model, dim_feedforward, dropout=0.1):
    linear2(dropout(relu(linear1(x)))). See the module docstring for the cases."""
    __tracebackhide__ = True
    device = device or pick_device()
    return run_check("FeedForward", cls, [_ffn_case(c, device) for c in cases], points=points)


# --------------------------------------------------------------------------
# EncoderLayer and Encoder

LAYER_DEFAULTS = dict(batch=2, L=5, E=8, nhead=2, F=16, dropout=0.1, src_mask=None, padding=False, dtype="float32")
ENCODER_DEFAULTS = dict(LAYER_DEFAULTS, num_layers=2)

LAYER_NAMES = "self_attn, linear1, linear2, norm1, norm2"


def _layer_state(E: int, F_: int, gen: torch.Generator, dtype: torch.dtype, prefix: str = "") -> State:
    """A random state dict of nn.TransformerEncoderLayer(E, nhead, F_): every weight and bias drawn,
    LayerNorm weights around 1."""
    state = {
        "self_attn.in_proj_weight": _draw((3 * E, E), gen, dtype, std=E**-0.5),  # (3E, E)
        "self_attn.in_proj_bias": _draw((3 * E,), gen, dtype, std=0.3),
        "self_attn.out_proj.weight": _draw((E, E), gen, dtype, std=E**-0.5),
        "self_attn.out_proj.bias": _draw((E,), gen, dtype, std=0.3),
        **_ffn_state(E, F_, gen, dtype),
        "norm1.weight": _draw((E,), gen, dtype, std=0.3, mean=1.0),
        "norm1.bias": _draw((E,), gen, dtype, std=0.3),
        "norm2.weight": _draw((E,), gen, dtype, std=0.3, mean=1.0),
        "norm2.bias": _draw((E,), gen, dtype, std=0.3),
    }
    return {prefix + k: v for k, v in state.items()}


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


def _torch_layer(c: Mapping[str, Any]) -> nn.TransformerEncoderLayer:
    return nn.TransformerEncoderLayer(c["E"], c["nhead"], c["F"], c["dropout"], batch_first=True,
                                      dtype=torch.float64)


def _run_reference(module: nn.Module, x: Tensor, **kwargs) -> Tensor:
    module.eval()
    with torch.enable_grad():  # PyTorch's slow path: its documented computation, no nested tensors
        return module(x, **kwargs).detach()


def _layer_mistakes(p: State, nhead: int, x: Tensor, m: Tensor | None, pad: Tensor | None) -> dict[str, Mistake]:
    found: dict[str, Mistake] = {}
    ref = lambda **bug: encoder_layer_reference(p, nhead, x, m, pad, **bug)  # noqa: E731
    for name, hint, bug in [
        ("pre-norm", "Your layer is pre-norm, x + Sublayer(LayerNorm(x)): this layer is post-norm, as the "
         "original Transformer and PyTorch's default, LayerNorm(x + Sublayer(x)).", dict(pre_norm=True)),
        ("no residual attn", "The residual connection around the attention is missing: "
         "h = norm1(src + self_attn(src)), not norm1(self_attn(src)).", dict(no_residual_attn=True)),
        ("no residual ffn", "The residual connection around the feed-forward network is missing: "
         "out = norm2(h + ffn(h)), not norm2(ffn(h)).", dict(no_residual_ffn=True)),
        ("no residuals", "The residual connections are missing: each sublayer's input is added to its output "
         "before the LayerNorm, norm(x + sublayer(x)).", dict(no_residual_attn=True, no_residual_ffn=True)),
        ("residual from input", "The second residual adds the output of the first sublayer, "
         "out = norm2(h + ffn(h)), not the layer's input src.", dict(residual_from_input=True)),
        ("norm sublayer only", "Post-norm normalises the sum, norm(x + sublayer(x)); you normalise the "
         "sublayer's output alone, x + norm(sublayer(x)).", dict(norm_sublayer_only=True)),
        ("norms swapped", "norm1 follows the attention and norm2 the feed-forward network; yours are swapped.",
         dict(norms_swapped=True)),
        ("one norm", "Use norm2 after the feed-forward network (norm1 after the attention): each sublayer has "
         "its own LayerNorm.", dict(one_norm=True)),
        ("no relu", "The ReLU of the feed-forward network is missing: linear2(dropout(relu(linear1(h)))).",
         dict(no_relu=True)),
        ("gelu", "The activation of the feed-forward network is a ReLU, not a GELU.", dict(gelu=True)),
    ]:
        found[name] = Mistake(hint, dict(output=_hide_padding(ref(**bug), pad)))

    def masked(hint, attn_mask, kpm):
        return Mistake(hint, dict(output=_hide_padding(encoder_layer_reference(p, nhead, x, attn_mask, kpm), pad)))

    if pad is not None:
        found["padding inverted"] = masked(
            "Your src_key_padding_mask is inverted: True marks the padding, the keys that must NOT be attended "
            "(the nn.MultiheadAttention convention, opposite to F.scaled_dot_product_attention's).", m, ~pad)
        found["padding ignored"] = masked(
            "Your layer ignores src_key_padding_mask: pass it to the attention as key_padding_mask.", m, None)
    if m is not None:
        found["src_mask inverted"] = masked(
            "Your src_mask is inverted: True marks the positions that must NOT be attended (the "
            "nn.MultiheadAttention convention, opposite to F.scaled_dot_product_attention's).", ~m, pad)
        found["src_mask ignored"] = masked(
            "Your layer ignores src_mask: pass it to the attention as attn_mask.", None, pad)
        if pad is not None:
            found["masks inverted"] = masked(
                "Your masks are inverted: True marks what must NOT be attended, in src_mask and "
                "src_key_padding_mask alike.", ~m, ~pad)
            found["masks ignored"] = masked(
                "Your layer ignores its masks: pass src_mask to the attention as attn_mask and "
                "src_key_padding_mask as key_padding_mask.", None, None)
    return found


def _layer_inputs(c: Mapping[str, Any], gen: torch.Generator, dtype: torch.dtype):
    B, L, E = int(c["batch"]), int(c["L"]), int(c["E"])
    if E % c["nhead"]:
        raise ValueError("E must be a multiple of nhead")
    src_mask, pad, what = _masks(c, gen)
    x = _draw((B, L, E), gen, dtype)  # (B, L, E)
    return x, src_mask, pad, what


def _kwargs(names: tuple[str, str], src_mask, pad, device) -> dict[str, Tensor]:
    kwargs = {}
    if src_mask is not None:
        kwargs[names[0]] = src_mask.to(device)
    if pad is not None:
        kwargs[names[1]] = pad.to(device)
    return kwargs


@built_once_in_grader
def _layer_case(spec: Mapping[str, Any], device: torch.device) -> Case:
    c = with_defaults(spec, LAYER_DEFAULTS)
    dtype, dropout = as_dtype(c["dtype"]), float(c["dropout"])
    gen = generator(case_seed(spec, "EncoderLayer"))
    x, src_mask, pad, what = _layer_inputs(c, gen, dtype)
    state = _layer_state(c["E"], c["F"], gen, dtype)
    x64, p64 = reference(x), _as_reference(state)

    with _fresh_rng(torch.device("cpu")):
        torch_layer = _torch_layer(c)
    torch_layer.load_state_dict(p64)
    ref_kwargs = _kwargs(("src_mask", "src_key_padding_mask"), src_mask, pad, torch.device("cpu"))
    expected = dict(output=_hide_padding(_run_reference(torch_layer, x64, **ref_kwargs), pad))

    xd = x.to(device)
    state_d = {k: v.to(device) for k, v in state.items()}
    kwargs = _kwargs(("src_mask", "src_key_padding_mask"), src_mask, pad, device)

    def run(cls):
        holder: list = []
        with _fresh_rng(device), _watch_modules(_ENCODER_MODULES, holder), torch.no_grad():
            holder.append(cls(c["E"], c["nhead"], c["F"], dropout))
            module = _to(holder[0], "EncoderLayer", device, dtype)
            _load(module, state_d, "EncoderLayer", "nn.TransformerEncoderLayer", LAYER_NAMES)
            module.eval()
            out = _call_twice_if_random(module, lambda m: _call_fresh(m, xd, kwargs), dropout, False, device)
        return _hide_padding(out, pad)

    args = f"EncoderLayer({c['E']}, {c['nhead']}, {c['F']}, {dropout:g}) in eval mode"
    return Case(
        inputs=f"{args}, on {describe(dict(src=xd, **kwargs), like=xd)}" + (f" ({what})" if what else ""),
        run=run,
        expected=expected,
        like=xd,
        mistakes=lambda: _layer_mistakes(p64, c["nhead"], x64, src_mask, pad),
    )


def check_encoder_layer(cls: Callable, *, points: float, cases: Sequence[Mapping[str, Any]],
                        device: torch.device | None = None):
    """Check the class EncoderLayer(d_model, nhead, dim_feedforward, dropout) against
    nn.TransformerEncoderLayer(..., batch_first=True) in eval mode; using PyTorch's encoder
    classes earns 0. See the module docstring for the cases."""
    __tracebackhide__ = True
    device = device or pick_device()
    return run_check("EncoderLayer", cls, [_layer_case(c, device) for c in cases], points=points,
                     forbidden=FORBIDDEN_ENCODER)


class ReferenceEncoderLayer(nn.Module):
    """A correct post-norm encoder layer with the parameter names of nn.TransformerEncoderLayer
    (written without it): the layer the Encoder check hands to the student's Encoder."""

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
        attn, _ = self.self_attn(src, src, src, attn_mask=src_mask, key_padding_mask=src_key_padding_mask,
                                 need_weights=False)  # (B, L, E)
        h = self.norm1(src + self.dropout1(attn))
        ff = self.linear2(self.dropout(F.relu(self.linear1(h))))  # (B, L, E)
        return self.norm2(h + self.dropout2(ff))


def _encoder_mistakes(layers: list[State], nhead: int, x: Tensor, m: Tensor | None,
                      pad: Tensor | None) -> dict[str, Mistake]:
    found: dict[str, Mistake] = {}
    n = len(layers)

    def stack(ps: Sequence[State], attn_mask=m, kpm=pad, chain: bool = True) -> Tensor:
        out = x
        for p in ps:
            out = encoder_layer_reference(p, nhead, out if chain else x, attn_mask, kpm)
        return out

    def add(name, hint, out):
        found[name] = Mistake(hint, dict(output=_hide_padding(out, pad)))

    if n > 1:
        add("shared last", "All your layers have the same weights (those of the last layer loaded): the "
            "layers must be separate copies, copy.deepcopy(layer) for each, not the same module repeated "
            "(nn.ModuleList([layer] * num_layers) repeats one module).", stack([layers[-1]] * n))
        add("shared first", "All your layers have the same weights: the layers must be separate copies, "
            "copy.deepcopy(layer) for each, not the same module repeated.", stack([layers[0]] * n))
        add("not chained", "Each layer must take the previous layer's output: out = layer(out, ...), "
            "starting from src; yours seem to all read src.", stack(layers, chain=False))
        add("one layer short", "Your encoder applies num_layers - 1 layers: apply all of self.layers, in order.",
            stack(layers[:-1]))
        add("first layer only", "Your encoder applies only the first layer: apply all of self.layers, in order.",
            stack(layers[:1]))
        add("reversed", "Apply the layers in order, self.layers[0] first.", stack(layers[::-1]))
    if pad is not None:
        add("padding ignored", "Your encoder does not pass src_key_padding_mask to its layers: every layer "
            "gets both masks.", stack(layers, kpm=None))
        add("padding inverted", "Your src_key_padding_mask is inverted: True marks the padding, the keys that "
            "must NOT be attended; pass it to the layers unchanged.", stack(layers, kpm=~pad))
        if n > 1:
            add("padding first only", "Pass the masks to every layer, not only the first.",
                _stack_first_only(layers, nhead, x, m, pad, which="pad"))
    if m is not None:
        add("mask ignored", "Your encoder does not pass mask to its layers: every layer gets it as src_mask.",
            stack(layers, attn_mask=None))
        add("mask inverted", "Your mask is inverted: True marks the positions that must NOT be attended; pass "
            "it to the layers unchanged.", stack(layers, attn_mask=~m))
        if n > 1:
            add("mask first only", "Pass the masks to every layer, not only the first.",
                _stack_first_only(layers, nhead, x, m, pad, which="mask"))
    if m is not None and pad is not None:
        add("masks ignored", "Your encoder does not pass the masks to its layers: every layer gets "
            "src_mask=mask and src_key_padding_mask=src_key_padding_mask.", stack(layers, attn_mask=None, kpm=None))
    return found


def _stack_first_only(layers, nhead, x, m, pad, which: str) -> Tensor:
    out = x
    for i, p in enumerate(layers):
        keep = i == 0
        out = encoder_layer_reference(p, nhead, out, m if keep or which != "mask" else None,
                                      pad if keep or which != "pad" else None)
    return out


@built_once_in_grader
def _encoder_case(spec: Mapping[str, Any], device: torch.device) -> Case:
    c = with_defaults(spec, ENCODER_DEFAULTS)
    dtype, dropout, n = as_dtype(c["dtype"]), float(c["dropout"]), int(c["num_layers"])
    gen = generator(case_seed(spec, "Encoder"))
    x, src_mask, pad, what = _layer_inputs(c, gen, dtype)
    state: State = {}
    for i in range(n):  # every layer its own weights
        state.update(_layer_state(c["E"], c["F"], gen, dtype, prefix=f"layers.{i}."))
    x64, p64 = reference(x), _as_reference(state)
    layers64 = [{k.removeprefix(f"layers.{i}."): v for k, v in p64.items() if k.startswith(f"layers.{i}.")}
                for i in range(n)]

    with _fresh_rng(torch.device("cpu")):
        torch_encoder = nn.TransformerEncoder(_torch_layer(c), n, enable_nested_tensor=False)
    torch_encoder.load_state_dict(p64)
    ref_kwargs = _kwargs(("mask", "src_key_padding_mask"), src_mask, pad, torch.device("cpu"))
    expected = dict(output=_hide_padding(_run_reference(torch_encoder, x64, **ref_kwargs), pad))

    xd = x.to(device)
    state_d = {k: v.to(device) for k, v in state.items()}
    kwargs = _kwargs(("mask", "src_key_padding_mask"), src_mask, pad, device)

    def run(cls):
        holder: list = []
        with _fresh_rng(device), _watch_modules(_ENCODER_MODULES, holder), torch.no_grad():
            layer = ReferenceEncoderLayer(c["E"], c["nhead"], c["F"], dropout)
            holder.append(cls(layer, n))
            module = _to(holder[0], "Encoder", device, dtype)
            _load(module, state_d, "Encoder", "nn.TransformerEncoder",
                  "self.layers, an nn.ModuleList of num_layers copies of the layer")
            module.eval()
            out = _call_twice_if_random(module, lambda m: _call_fresh(m, xd, kwargs), dropout, False, device)
        return _hide_padding(out, pad)

    args = f"Encoder(layer, {n}) with layer = EncoderLayer({c['E']}, {c['nhead']}, {c['F']}, {dropout:g})"
    return Case(
        inputs=f"{args} in eval mode, on {describe(dict(src=xd, **kwargs), like=xd)}" + (f" ({what})" if what else ""),
        run=run,
        expected=expected,
        like=xd,
        mistakes=lambda: _encoder_mistakes(layers64, c["nhead"], x64, src_mask, pad),
    )


def check_encoder(cls: Callable, *, points: float, cases: Sequence[Mapping[str, Any]],
                  device: torch.device | None = None):
    """Check the class Encoder(layer, num_layers) against nn.TransformerEncoder(layer, num_layers,
    enable_nested_tensor=False) in eval mode, every layer with its own weights. The layer it is
    given is a correct one (ReferenceEncoderLayer), so that only the stack is graded."""
    __tracebackhide__ = True
    device = device or pick_device()
    return run_check("Encoder", cls, [_encoder_case(c, device) for c in cases], points=points,
                     forbidden=FORBIDDEN_ENCODER)
