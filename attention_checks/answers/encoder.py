"""How 06-encoder is judged: references (PyTorch's modules and the formulas, in float64 on the
CPU) and the known mistakes of LayerNorm, positional_encoding, FeedForward, EncoderLayer and
Encoder."""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..cases import Inputs, Spec
from ..modules import State, fresh_rng, hide_padding
from .catalogue import Answer, Mistake

Tensor = torch.Tensor


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
        # over a batch of one, every feature is its own mean: the output is bias, which looks like
        # other mistakes (a LayerNorm that starts at zero), and merge_twins names them together
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


def _torch_layer(c: Mapping[str, Any], norm_first: bool = False) -> nn.TransformerEncoderLayer:
    return nn.TransformerEncoderLayer(c["E"], c["nhead"], c["F"], c["dropout"], batch_first=True,
                                      norm_first=norm_first, dtype=torch.float64)


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
        found[name] = Mistake(hint, dict(output=hide_padding(ref(**bug), pad)))

    def masked(hint, attn_mask, kpm):
        return Mistake(hint, dict(output=hide_padding(encoder_layer_reference(p, nhead, x, attn_mask, kpm), pad)))

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


def _encoder_mistakes(layers: list[State], nhead: int, x: Tensor, m: Tensor | None,
                      pad: Tensor | None) -> dict[str, Mistake]:
    found: dict[str, Mistake] = {}
    n = len(layers)

    def stack(ps: Sequence[State], attn_mask=m, kpm=pad, chain: bool = True) -> Tensor:
        out = x
        for p in ps:
            out = encoder_layer_reference(p, nhead, out if chain else x, attn_mask, kpm, pre_norm=True)
        return out

    def add(name, hint, out):
        found[name] = Mistake(hint, dict(output=hide_padding(out, pad)))

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
                                      pad if keep or which != "pad" else None, pre_norm=True)
    return out


# --------------------------------------------------------------------------
# what the declared checks are judged by


def _layer_norm_reference(x: Inputs, spec: Spec) -> dict[str, Tensor]:
    e, dims = x.extra, int(spec["dims"])
    shape = tuple(x.args["x"].shape[-dims:])
    w, b = (e["state"]["weight"], e["state"]["bias"]) if e["state"] else (torch.ones(shape, dtype=torch.float64),
                                                                           torch.zeros(shape, dtype=torch.float64))
    torch_ln = nn.LayerNorm(shape, eps=e["eps"], dtype=torch.float64)
    with torch.no_grad():
        torch_ln.weight.copy_(w)
        torch_ln.bias.copy_(b)
        return dict(output=torch_ln(x.args["x"]))


def _layer_norm_answer_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    e, dims = x.extra, int(spec["dims"])
    shape = tuple(x.args["x"].shape[-dims:])
    w = e["state"]["weight"] if e["state"] else torch.ones(shape, dtype=torch.float64)
    b = e["state"]["bias"] if e["state"] else torch.zeros(shape, dtype=torch.float64)
    return _layer_norm_mistakes(x.args["x"], dims, w, b, e["eps"], bool(spec["init"]))


def _pe_reference(x: Inputs, spec: Spec) -> dict[str, Tensor]:
    return dict(output=positional_encoding_reference(x.args["max_len"], x.args["d_model"]))


def _ffn_reference(x: Inputs, spec: Spec) -> dict[str, Tensor]:
    return dict(output=_ffn(x.extra["state"], x.args["x"]))


def _layer_reference(x: Inputs, spec: Spec) -> dict[str, Tensor]:
    with fresh_rng(torch.device("cpu")):
        layer = _torch_layer(spec)
    layer.load_state_dict(x.extra["state"])
    pad = x.extra["pad"]
    return dict(output=hide_padding(_run_reference(layer, x.args["src"], **x.kwargs), pad))


def _layer_answer_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    return _layer_mistakes(x.extra["state"], spec["nhead"], x.args["src"], x.kwargs.get("src_mask"), x.extra["pad"])


def _layers(x: Inputs, n: int) -> list[State]:
    state = x.extra["state"]
    return [{k.removeprefix(f"layers.{i}."): v for k, v in state.items() if k.startswith(f"layers.{i}.")}
            for i in range(n)]


def _encoder_reference(x: Inputs, spec: Spec) -> dict[str, Tensor]:
    n = int(spec["num_layers"])
    with fresh_rng(torch.device("cpu")):  # the given layer is pre-norm
        encoder = nn.TransformerEncoder(_torch_layer(spec, norm_first=True), n, enable_nested_tensor=False)
    encoder.load_state_dict(x.extra["state"])
    return dict(output=hide_padding(_run_reference(encoder, x.args["src"], **x.kwargs), x.extra["pad"]))


def _encoder_answer_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    return _encoder_mistakes(_layers(x, int(spec["num_layers"])), spec["nhead"], x.args["src"], x.kwargs.get("mask"),
                             x.extra["pad"])


ANSWERS = {
    "LayerNorm": Answer(_layer_norm_reference, _layer_norm_answer_mistakes),
    "positional_encoding": Answer(_pe_reference, lambda x, spec, expected: _pe_mistakes(x.args["max_len"],
                                                                                        x.args["d_model"])),
    "FeedForward": Answer(_ffn_reference, lambda x, spec, expected: _ffn_mistakes(x.extra["state"], x.args["x"])),
    "EncoderLayer": Answer(_layer_reference, _layer_answer_mistakes),
    "Encoder": Answer(_encoder_reference, _encoder_answer_mistakes),
}
