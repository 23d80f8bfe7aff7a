"""How 08-decoder is judged: references (PyTorch's own modules in float64 on the CPU, with the
case's weights) and the known mistakes of each graded piece."""
from __future__ import annotations

import copy
import functools
import itertools
import warnings
from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..cases import Inputs, Spec
from ..decoder import (
    build_seq2seq,
    hide_padding,
    torch_decoder,
    torch_layer,
    torch_transformer,
    train_losses,
    training_spec,
)
from ..modules import seeded
from ..toy_models import ToyTranslator
from .catalogue import Answer, Depends, Fit, Mistake

Tensor = torch.Tensor


def _loaded(make: Callable[[], nn.Module], state: dict[str, Tensor]) -> nn.Module:
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nn.Transformer warns about nested tensors with odd head counts
        module = make()
    module = module.to(torch.float64)
    module.load_state_dict(state)
    return module.eval()


# --------------------------------------------------------------------------
# a decoder layer with switchable bugs, on PyTorch's submodules


def layer_forward(layer: nn.TransformerDecoderLayer, tgt, memory, tgt_mask=None, memory_mask=None,
                  tgt_key_padding_mask=None, memory_key_padding_mask=None, bug: str | None = None) -> Tensor:
    """nn.TransformerDecoderLayer's forward (eval mode), or the same with one known bug (a key of
    LAYER_BUGS)."""
    T, S = tgt.shape[1], memory.shape[1]
    sa_mask, sa_pad = tgt_mask, tgt_key_padding_mask
    ca_mask, ca_pad = memory_mask, memory_key_padding_mask
    if bug == "tgt_mask ignored":
        sa_mask = None
    elif bug == "tgt padding ignored":
        sa_pad = None
    elif bug == "memory padding ignored":
        ca_pad = None
    elif bug == "causal memory":
        ca_mask = torch.ones(T, S, dtype=torch.bool).triu(1)
    elif bug == "paddings swapped":
        sa_pad, ca_pad = memory_key_padding_mask, tgt_key_padding_mask
    elif bug == "source padding in self-attention":
        sa_pad = memory_key_padding_mask
    # which module plays each role: the norms after the three sublayers, the two attentions
    norm1, norm2, norm3 = (getattr(layer, n) for n in _NORM_ORDERS.get(bug, ("norm1", "norm2", "norm3")))
    self_attn, cross_attn = (getattr(layer, n) for n in _ATTENTIONS.get(bug, ("self_attn", "multihead_attn")))
    mha = lambda m, q, k, v, mask, pad: m(q, k, v, attn_mask=mask, key_padding_mask=pad, need_weights=False)[0]  # noqa: E731
    ffn = lambda x: layer.linear2(F.relu(layer.linear1(x)))  # noqa: E731
    if bug == "pre-norm":
        x = norm1(tgt)
        x = tgt + mha(self_attn, x, x, x, sa_mask, sa_pad)
        x = x + mha(cross_attn, norm2(x), memory, memory, ca_mask, ca_pad)
        return x + ffn(norm3(x))
    x = norm1(tgt + mha(self_attn, tgt, tgt, tgt, sa_mask, sa_pad))
    if bug == "cross keys from target":
        ca = mha(cross_attn, x, x, x, sa_mask, sa_pad)
    elif bug == "cross query from tgt":
        ca = mha(cross_attn, tgt, memory, memory, ca_mask, ca_pad)
    elif bug == "memory as query":  # multihead_attn(memory, x, x): one row per source token
        ca = mha(cross_attn, memory, x, x, ca_mask, ca_pad)
    elif bug == "no cross-attention":
        ca = torch.zeros_like(x)
    else:
        ca = mha(cross_attn, x, memory, memory, ca_mask, ca_pad)
    if bug == "no cross residual":
        x = norm2(ca)
    else:
        x = norm2(x + ca)
    return norm3(x + ffn(x))


_SUBLAYERS = ("the self-attention", "the cross-attention", "the feed-forward network")
_NORMS = ("norm1", "norm2", "norm3")
# LayerNorms in another order, or one of them used for two or three sublayers (the others left
# unused): each norm's loaded weights differ, so every arrangement gives its own output
_NORM_ORDERS = {f"norms {''.join(n[-1] for n in order)}": order for order in itertools.product(_NORMS, repeat=3)
                if order != _NORMS}
_ATTENTIONS = {"self_attn twice": ("self_attn", "self_attn"), "multihead_attn twice": ("multihead_attn", "multihead_attn"),
               "attentions swapped": ("multihead_attn", "self_attn")}


def _norms_hint(order: tuple[str, ...]) -> str:
    where = "; ".join(f"{n} after {s}" for n, s in zip(order, _SUBLAYERS))
    if len(set(order)) == 3:
        return (f"Your LayerNorms are in the wrong order ({where}): norm1 follows the self-attention, norm2 the "
                "cross-attention and norm3 the feed-forward network; each has its own loaded weights.")
    reused = max(order, key=order.count)
    unused = " and ".join(n for n in _NORMS if n not in order)
    return (f"You use {reused} for {'two' if order.count(reused) == 2 else 'all three'} sublayers and never {unused} "
            f"({where}): each sublayer has its own LayerNorm with its own loaded weights, norm1 after the "
            "self-attention, norm2 after the cross-attention, norm3 after the feed-forward network.")


_ATTENTION_HINT = ("self_attn is the self-attention over the target and multihead_attn the cross-attention to the "
                   "memory, each with its own loaded weights")
LAYER_BUGS = {
    "tgt_mask ignored": "Your output ignores tgt_mask: pass it to the self-attention as attn_mask "
                        "(the causal mask keeps each target position from seeing later ones).",
    "tgt padding ignored": "Your output ignores tgt_key_padding_mask: pass it to the self-attention as "
                           "key_padding_mask.",
    "memory padding ignored": "Your output ignores memory_key_padding_mask: pass it to the cross-attention "
                              "(multihead_attn) as key_padding_mask, so that no target position reads the "
                              "source's padding.",
    "causal memory": "Your cross-attention has a causal mask: the whole source is known, so every target "
                     "position may read every source token. Pass memory_mask (usually None) to the "
                     "cross-attention, not a causal mask.",
    "paddings swapped": "The padding masks are swapped: tgt_key_padding_mask belongs to the self-attention, "
                        "memory_key_padding_mask (the source's padding) to the cross-attention.",
    "source padding in self-attention": "Your self-attention uses the source's padding mask: the target "
                                        "attends to itself, so it takes tgt_key_padding_mask.",
    "cross keys from target": "Your cross-attention takes its keys and values from the target: the query comes "
                              "from the target, the keys and values from memory (multihead_attn(x, memory, memory)).",
    "cross query from tgt": "Your cross-attention's query is the layer's input tgt: it must be the output of "
                            "the first sublayer, x = norm1(tgt + self-attention).",
    "memory as query": "Your cross-attention's query is the memory: the query comes from the target (x, the "
                       "first sublayer's output), the keys and values from memory (multihead_attn(x, memory, "
                       "memory)), so that it gives one row per target position.",
    "no cross-attention": "Your output does not depend on memory: the second sublayer is the cross-attention "
                          "to the encoder's output.",
    "no cross residual": "The second sublayer has no residual connection: x = norm2(x + cross-attention).",
    "pre-norm": "Your layer is pre-norm (x + Sublayer(LayerNorm(x))); PyTorch's default, and this exercise, "
                "is post-norm: LayerNorm(x + Sublayer(x)).",
    **{bug: _norms_hint(order) for bug, order in _NORM_ORDERS.items()},
    "self_attn twice": f"Your cross-attention runs self_attn again and multihead_attn is never used: {_ATTENTION_HINT}.",
    "multihead_attn twice": f"Your self-attention runs multihead_attn, which is also your cross-attention, and "
                            f"self_attn is never used: {_ATTENTION_HINT}.",
    "attentions swapped": f"Your two attention modules are swapped: {_ATTENTION_HINT}.",
}


def _layer_reference(x: Inputs, spec: Spec) -> dict[str, Any]:
    layer = _loaded(lambda: torch_layer(spec), x.extra["state"])
    with torch.no_grad():
        out = layer(*x.args.values(), **x.kwargs)
    return dict(output=hide_padding(out, x.kwargs.get("tgt_key_padding_mask")))


def _layer_variants(layer, x: Inputs, bugs) -> dict[str, Tensor | None]:
    found = {}
    T, S = x.args["tgt"].shape[1], x.args["memory"].shape[1]
    for bug in bugs:
        if bug in ("paddings swapped", "source padding in self-attention") and T != S:
            continue
        try:
            with torch.no_grad():
                out = layer_forward(layer, *x.args.values(), **x.kwargs, bug=bug)
        except (RuntimeError, ValueError, AssertionError):  # a bug that cannot run on this case's shapes
            continue
        found[bug] = hide_padding(out, x.kwargs.get("tgt_key_padding_mask"))
    return found


def _layer_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    layer = _loaded(lambda: torch_layer(spec), x.extra["state"])
    return {bug: Mistake(LAYER_BUGS[bug], dict(output=out)) for bug, out in _layer_variants(layer, x, LAYER_BUGS).items()}


# --------------------------------------------------------------------------
# Decoder


def _decoder_reference(x: Inputs, spec: Spec) -> dict[str, Any]:
    decoder = _loaded(lambda: torch_decoder(spec, norm_first=True), x.extra["state"])  # the given layer's
    with torch.no_grad():
        out = decoder(*x.args.values(), **x.kwargs)
    return dict(output=hide_padding(out, x.kwargs.get("tgt_key_padding_mask")))


def _decoder_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    decoder = _loaded(lambda: torch_decoder(spec, norm_first=True), x.extra["state"])  # the given layer's
    tgt, memory = x.args.values()
    return _stack_mistakes(list(decoder.layers), decoder.norm, tgt, memory, x.kwargs)


def _stack_mistakes(layers: list[nn.Module], norm: nn.Module | None, tgt: Tensor, memory: Tensor,
                    kwargs: dict[str, Tensor]) -> dict[str, Mistake]:
    """The known mistakes of a decoder stack (the Decoder's, and the Transformer's decoder) around
    correct layers, on float64 CPU inputs: each the output (padded rows hidden) and its hint."""
    pad = kwargs.get("tgt_key_padding_mask")
    finish = lambda out: hide_padding(norm(out) if norm is not None else out, pad)  # noqa: E731
    found: dict[str, Mistake] = {}

    def add(name, hint, out):
        found[name] = Mistake(hint, dict(output=out))

    def run(stack, tgt=tgt, memory=memory, **kw):
        return _run_stack(stack, tgt, memory, {**kwargs, **kw})

    with torch.no_grad():
        if len(layers) > 1:
            # one module repeated: loading the state dict leaves it with the last layer's weights
            add("shared layers", "All your layers have the same weights: keep deep copies (copy.deepcopy) of the "
                "layer, not the same module repeated.", finish(run([layers[-1]] * len(layers))))
            add("first layer only", "Only your first layer seems to count: feed each layer's output to the next.",
                finish(run(layers[:1])))
            add("last layer only", "Only your last layer seems to count: each layer must take the previous "
                "layer's output, starting from tgt.", finish(run(layers[-1:])))
            add("one layer short", "Your stack runs one layer too few.", finish(run(layers[:-1])))
            add("reversed", "Apply the layers in order, self.layers[0] first.", finish(run(layers[::-1])))
        if norm is not None:
            add("norm missing", "The final norm is missing: apply self.norm to the last layer's output when it "
                "is not None.", hide_padding(run(layers), pad))
            final = "the final norm is applied once, to the last layer's output"
            if len(layers) > 1:
                add("norm after every layer", f"Your final norm runs after every layer: {final}.",
                    hide_padding(run(_each_then(layers, norm)), pad))
            add("norm before the layers", f"Your final norm normalises the decoder's input tgt: {final}.",
                hide_padding(run(layers, tgt=norm(tgt)), pad))
            add("norm on memory", f"Your final norm normalises the memory: {final}.",
                hide_padding(run(layers, memory=norm(memory)), pad))
        if kwargs:
            add("masks not passed", "Your layers get no masks: pass tgt_mask, memory_mask and the two padding "
                "masks to every layer.", finish(_run_stack(layers, tgt, memory, {})))
        if len(layers) > 1 and "memory_key_padding_mask" not in kwargs and "memory_mask" not in kwargs:
            out = layers[0](tgt, memory, **kwargs)
            for layer in layers[1:]:
                out = layer(out, out, **kwargs)  # later layers read the previous output as their memory
            add("memory from previous layer", "Every layer reads the same memory, the encoder's output; only the "
                "target flows from layer to layer.", finish(out))
    return found


def _each_then(layers, norm):
    """The layers, each followed by `norm` (a final norm misplaced inside the loop)."""
    return [lambda out, memory, layer=layer, **kw: norm(layer(out, memory, **kw)) for layer in layers]


def _run_stack(layers, tgt, memory, kwargs):
    out = tgt
    for layer in layers:
        out = layer(out, memory, **kwargs)
    return out


# --------------------------------------------------------------------------
# Transformer


def _transformer_reference(x: Inputs, spec: Spec) -> dict[str, Any]:
    model = _loaded(lambda: torch_transformer(spec), x.extra["state"])
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the encoder's fast path: "nested tensors are a prototype"
        out = model(*x.args.values(), **x.kwargs)
    return dict(output=hide_padding(out, x.kwargs.get("tgt_key_padding_mask")))


def _with_norm(stack: nn.Module, norm: nn.Module | None) -> nn.Module:
    """A shallow copy of an encoder or decoder with another final norm (its layers shared)."""
    other = copy.copy(stack)
    other._modules = dict(stack._modules)  # copy.copy shares the submodule dict: setting norm would change both
    other.norm = norm
    return other


def _transformer_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    model = _loaded(lambda: torch_transformer(spec), x.extra["state"])
    src, tgt = x.args.values()
    kw = x.kwargs
    pad = kw.get("tgt_key_padding_mask")
    dec_kw = {k: kw[k] for k in ("tgt_mask", "memory_mask", "tgt_key_padding_mask", "memory_key_padding_mask")
              if k in kw}
    found: dict[str, Mistake] = {}

    def add(name, hint, out):
        found[name] = Mistake(hint, dict(output=hide_padding(out.detach(), pad)))

    # with gradients on, nn.TransformerEncoder takes no fast path: the memory at padded source
    # positions is computed, not zeroed, as a student's encoder computes it
    with torch.enable_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        memory = model.encoder(src, mask=kw.get("src_mask"), src_key_padding_mask=kw.get("src_key_padding_mask"))
        if "memory_key_padding_mask" in kw:
            add("memory padding not passed", "The decoder does not get memory_key_padding_mask: pass it on, so that "
                "the cross-attention skips the source's padding.",
                model.decoder(tgt, memory, **{k: v for k, v in dec_kw.items() if k != "memory_key_padding_mask"}))
        if "src_key_padding_mask" in kw or "src_mask" in kw:
            add("encoder masks not passed", "The encoder does not get src_mask / src_key_padding_mask.",
                model.decoder(tgt, model.encoder(src), **dec_kw))
        if "src_mask" not in kw:
            add("memory is the source", "Your decoder reads src itself: its memory is the encoder's output, "
                "memory = encoder(src, ...).", model.decoder(tgt, src, **dec_kw))
        encode = lambda encoder: encoder(src, mask=kw.get("src_mask"),  # noqa: E731
                                         src_key_padding_mask=kw.get("src_key_padding_mask"))
        add("encoder norm missing", "The encoder's final LayerNorm (encoder.norm) is not applied.",
            model.decoder(tgt, encode(_with_norm(model.encoder, None)), **dec_kw))
        add("decoder norm missing", "The decoder's final LayerNorm (decoder.norm) is not applied.",
            _with_norm(model.decoder, None)(tgt, memory, **dec_kw))
        # one LayerNorm module as both final norms: loading the state dict leaves it with the decoder's weights
        add("final norm shared", "Your encoder and decoder share one final LayerNorm: encoder.norm and decoder.norm "
            "are two modules, each with its own weights.",
            model.decoder(tgt, encode(_with_norm(model.encoder, model.decoder.norm)), **dec_kw))
    # the student's Transformer runs the student's Decoder and DecoderLayer: their mistakes show here too
    layers, memory = list(model.decoder.layers), memory.detach()
    stack = _stack_mistakes(layers, model.decoder.norm, tgt, memory, dec_kw)
    found.update((name, m) for name, m in stack.items() if name != "norm missing")
    with torch.no_grad():
        for bug, hint in LAYER_BUGS.items():
            try:
                out = _run_stack([functools.partial(layer_forward, layer, bug=bug) for layer in layers], tgt, memory,
                                 dec_kw)
            except (RuntimeError, ValueError, AssertionError):  # a bug that cannot run on this case's shapes
                continue
            found.setdefault(bug, Mistake(hint, dict(output=hide_padding(model.decoder.norm(out), pad))))
    return found


# --------------------------------------------------------------------------
# shift_right


def _shift_reference(x: Inputs, spec: Spec) -> dict[str, Any]:
    tgt, start = x.args["tgt"], x.args["start_token"]
    return dict(output=torch.cat([torch.full_like(tgt[:, :1], start), tgt[:, :-1]], dim=1))


def _shift_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    tgt, start = x.args["tgt"], x.args["start_token"]
    first = torch.full_like(tgt[:, :1], start)
    right = expected["output"]

    found = {
        "shifted left": Mistake("Your tokens move to the left: the decoder input is the target moved one step to "
                                "the RIGHT, start_token first (start_token, tgt[:, 0], ..., tgt[:, T-2]).",
                                dict(output=torch.cat([tgt[:, 1:], first], dim=1))),
        "last token kept": Mistake("Your result has T + 1 columns: drop the target's last token, so that the "
                                   "decoder input has the target's length.",
                                   dict(output=torch.cat([first, tgt], dim=1))),
        "first token replaced": Mistake("You replaced the first token by start_token instead of shifting: every "
                                        "token moves one position to the right (off by one).",
                                        dict(output=torch.cat([first, tgt[:, 1:]], dim=1))),
        "rolled": Mistake("Column 0 must be start_token: torch.roll brings the last token round to the front.",
                          dict(output=torch.roll(tgt, 1, dims=1))),
        "unchanged": Mistake("Your result is the target itself: teacher forcing feeds the target shifted right "
                             "by one, with start_token in front, so that position t predicts tgt[:, t] from the "
                             "tokens before it.", dict(output=tgt.clone())),
        "start token wrong": Mistake("Your shift is right but position 0 does not hold the start token: write the "
                                     "start_token argument there (it changes from case to case; a tensor made with "
                                     "zeros, or a fixed number, leaves another value).", dict(output=None),
                                     fits=Fit("shift_with_another_start", dict(right=right, start=start))),
    }
    if tgt.shape[0] > 1:
        found["batch axis"] = Mistake("Your tokens move along the batch axis (dim 0): shift each sequence along its "
                                      "positions, dim 1 (start_token in column 0, then tgt[:, :-1]).",
                                      dict(output=torch.cat([torch.full_like(tgt[:1], start), tgt[:-1]], dim=0)))
    return found


# --------------------------------------------------------------------------
# greedy_decode


def greedy(model, src, start_token: int, max_len: int, pick: str = "last", feed: str = "all") -> Tensor:
    """Greedy decoding in float64 on the CPU, or a known variant of it: `pick` the logits of the
    "last" or the "first" position; `feed` the model "all" the tokens so far, the start token
    "alone", or only the "latest" token."""
    out = torch.full_like(src[:, :1], start_token)
    with torch.no_grad():
        for _ in range(max_len):
            given = out if feed == "all" else out[:, :1] if feed == "alone" else out[:, -1:]
            logits = model(src, given)
            scores = logits[:, -1] if pick == "last" else logits[:, 0]
            out = torch.cat([out, scores.argmax(-1, keepdim=True).to(src.dtype)], dim=1)
    return out[:, 1:]


def _greedy_reference(x: Inputs, spec: Spec) -> dict[str, Any]:
    model = ToyTranslator(x.extra["state"]).eval()
    return dict(output=greedy(model, x.args["src"], spec["start_token"], spec["max_len"]))


def _greedy_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    model = ToyTranslator(x.extra["state"]).eval()
    src, start, n = x.args["src"], spec["start_token"], spec["max_len"]
    right = expected["output"]
    first = torch.full_like(src[:, :1], start)
    # (feeding the right tokens at once gives the right answer: with a causal model it is what
    # greedy decoding computes, so only a pass over a fixed input can be told apart)
    with torch.no_grad():
        all_start = model(src, first.expand(-1, n)).argmax(-1).to(src.dtype)

    return {
        "start kept": Mistake("Your result starts with the start token: return only the max_len generated tokens.",
                              dict(output=torch.cat([first, right], dim=1))),
        "off by one": Mistake("Your result starts with the start token and misses the last generated token: "
                              "generate max_len tokens and drop the start token (out[:, 1:]).",
                              dict(output=torch.cat([first, right[:, :-1]], dim=1))),
        "one short": Mistake("You generate max_len - 1 tokens: loop max_len times.", dict(output=right[:, :-1])),
        "one too many": Mistake("You generate max_len + 1 tokens: loop max_len times, and return the max_len "
                                "tokens after the start token.",
                                dict(output=greedy(model, src, start, n + 1))),
        # with a causal model the first position's logits see the start token only: both bugs look alike
        "start token alone": Mistake("Every token you generate is predicted from the start token alone: append "
                                     "each predicted token to the decoder input, run the model on the longer "
                                     "input and take the logits of its LAST position (logits[:, -1]).",
                                     dict(output=greedy(model, src, start, n, feed="alone"))),
        "latest token only": Mistake("Each of your tokens is predicted from the previous token alone: the decoder "
                                     "reads the whole sequence so far (the start token and every token generated), "
                                     "not only the last one, as an RNN would; take the logits of its last position.",
                                     dict(output=greedy(model, src, start, n, feed="latest"))),
        "teacher forced": Mistake("Your tokens come from one parallel pass over a fixed input, as in training: at "
                                  "inference there is no ground truth to feed; generate one token at a time and "
                                  "feed each guess back.", dict(output=all_start)),
        "sampled": Mistake("Some of your tokens are not the model's most likely next token after your own earlier "
                           "tokens: are they sampled (torch.multinomial, Categorical(...).sample(), top-k)? Greedy "
                           "decoding always takes the argmax of the last position's logits, "
                           "logits[:, -1].argmax(-1). (An argmax over another axis gives other tokens too.)",
                           dict(output=None),
                           fits=Fit("sampled_tokens", dict(right=right, src=src, start=start, state=x.extra["state"])),
                           draws=True),
    }


# --------------------------------------------------------------------------
# training


def _training_losses(x: Inputs, spec: Spec, bug: str | None = None) -> Tensor:
    c = training_spec(spec)
    transformer = _loaded(lambda: torch_transformer(c), x.extra["state"])
    if bug == "encoder frozen":
        for p in transformer.encoder.parameters():
            p.requires_grad_(False)
    elif bug == "decoder frozen":
        for p in transformer.decoder.parameters():
            p.requires_grad_(False)
    model = build_seq2seq(transformer, x.extra["around"], c["vocab"], c["E"])
    if bug == "encoder frozen":  # no gradient through the memory: the source embedding learns nothing either
        model.src_embed.weight.requires_grad_(False)
    if bug == "output detached":  # nothing below the output layer gets a gradient
        for p in [*transformer.parameters(), model.src_embed.weight, model.tgt_embed.weight]:
            p.requires_grad_(False)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: threads only add overhead (the grading kernels use one too)
    try:
        with seeded(0):
            return train_losses(model, x.args["src"], x.args["tgt"], 1, c["steps"], c["lr"])
    finally:
        torch.set_num_threads(threads)


def _training_reference(x: Inputs, spec: Spec) -> dict[str, Any]:
    return dict(losses=_training_losses(x, spec))


def _training_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    curve = dict(right=expected["losses"])
    return {
        "encoder frozen": Mistake("Your loss falls, but as if the encoder never learned: gradients do not reach its "
                                  "weights (a .detach() or torch.no_grad() on the memory, or weights that are not "
                                  "nn.Parameters the optimiser can see).",
                                  dict(losses=_training_losses(x, spec, "encoder frozen"))),
        "decoder frozen": Mistake("Your loss falls, but as if the decoder never learned: gradients do not reach its "
                                  "weights (a .detach() or torch.no_grad() inside, or weights that are not "
                                  "nn.Parameters the optimiser can see).",
                                  dict(losses=_training_losses(x, spec, "decoder frozen"))),
        "output detached": Mistake("Your loss falls only as far as the output layer alone can take it: no gradient "
                                   "reaches the Transformer or the embeddings (a .detach() on the Transformer's "
                                   "output, or the forward pass under torch.no_grad()).",
                                   dict(losses=_training_losses(x, spec, "output detached"))),
        # no known run matches: what the curve itself says, and its cause where the grader has seen
        # whether the model's parts pass their own tests (_decided_by_the_parts)
        "first loss differs": Mistake(
            f"{FIRST_LOSS_DIFFERS} If your Transformer passes its own test (run in eval mode), {IN_TRAINING_MODE} "
            "Otherwise the Transformer test's hint names the mistake.",
            dict(losses=None), fits=Fit("first_loss_differs", curve),
            depends=_decided_by_the_parts(f"{FIRST_LOSS_DIFFERS} {PARTS_PASS}, so {IN_TRAINING_MODE}")),
        "learns less": Mistake(
            f"{LEARNS_LESS} If your Transformer fails its own test, that test's hint names the mistake (a small "
            f"difference in the forward pass grows as the model trains). If it passes, {NO_GRADIENT}",
            dict(losses=None), fits=Fit("learns_less", curve),
            depends=_decided_by_the_parts(f"{LEARNS_LESS} {PARTS_PASS}, so {NO_GRADIENT}")),
        "learns otherwise": Mistake(
            f"{LEARNS_OTHERWISE} If your Transformer fails its own test, that test's hint names the mistake. If it "
            f"passes, {OTHER_GRADIENTS}", dict(losses=None), fits=Fit("learns_otherwise", curve),
            depends=_decided_by_the_parts(f"{LEARNS_OTHERWISE} {PARTS_PASS}, so {OTHER_GRADIENTS}")),
    }


# what a training curve says, and its causes (the training test's hints, above)
FIRST_LOSS_DIFFERS = ("Your first loss, before any update, already differs: in training mode your model computes "
                      "something else than nn.Transformer does.")
IN_TRAINING_MODE = ("the difference is what training mode switches on: dropout. Every dropout must use the dropout "
                    "given to __init__ (0.0 here): pass it on to every layer and nn.MultiheadAttention, and use "
                    "F.dropout(x, p, training=self.training).")
LEARNS_LESS = ("Your first loss agrees with the reference's (within the tolerance) but your losses fall more slowly "
               "and end higher.")
NO_GRADIENT = ("part of the model does not learn: some weights get no gradient (a .detach() or torch.no_grad() "
               "inside your Transformer, weights kept as plain tensors instead of nn.Parameter) or are shared "
               "between two roles.")
LEARNS_OTHERWISE = "Your first loss agrees with the reference's (within the tolerance) but the later ones differ."
OTHER_GRADIENTS = ("the gradients differ from nn.Transformer's (a .detach() or torch.no_grad() inside your "
                   "Transformer, weights kept as plain tensors, or weights shared between two roles).")
PARTS_PASS = "Your DecoderLayer, Decoder and Transformer pass their own tests (run in eval mode)"


def _decided_by_the_parts(passed: str) -> Depends:
    """The training curve's cause once the grader has seen the model's parts' own tests."""
    return Depends(("DecoderLayer", "Decoder", "Transformer"), passed,
                   "the training test trains a model built from your classes, so a forward pass that differs "
                   "changes every loss. Fix what those tests' hints say first.")


ANSWERS = {
    "DecoderLayer": Answer(_layer_reference, _layer_mistakes),
    "Decoder": Answer(_decoder_reference, _decoder_mistakes),
    "Transformer": Answer(_transformer_reference, _transformer_mistakes),
    "shift_right": Answer(_shift_reference, _shift_mistakes),
    "greedy_decode": Answer(_greedy_reference, _greedy_mistakes),
    "training": Answer(_training_reference, _training_mistakes),
}
