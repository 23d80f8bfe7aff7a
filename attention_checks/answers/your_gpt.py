"""How 11-your-gpt is judged: a decoder-only model written out in float64 on the CPU (the contract's
names and order: pre-norm blocks, causal attention with RoPE or ALiBi, a 4x GELU MLP, a final
LayerNorm, an untied head), a train step and a generator of the same kind, and the known mistakes
of each, made by the same code with one bug switched on."""
from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from ..cases import Inputs, Spec
from ..your_gpt import ToyBigram, ToyDecoder, gpt_shapes
from .catalogue import Answer, Mistake

Tensor = torch.Tensor
NEG_INF = float("-inf")


# --------------------------------------------------------------------------
# the model


def rope(x: Tensor, positions: Tensor, base: float = 10000.0, interleaved: bool = False) -> Tensor:
    """Rotary positions, halves convention (feature i pairs with i + D/2), as chapter 10 grades it
    (or, a known mistake, pairs (2i, 2i + 1))."""
    half = x.shape[-1] // 2
    angle = positions.to(torch.float64)[:, None] * base ** (-2 * torch.arange(half, dtype=torch.float64) / x.shape[-1])
    x1, x2 = (x[..., 0::2], x[..., 1::2]) if interleaved else (x[..., :half], x[..., half:])
    y1, y2 = x1 * angle.cos() - x2 * angle.sin(), x1 * angle.sin() + x2 * angle.cos()
    return torch.stack([y1, y2], dim=-1).flatten(-2) if interleaved else torch.cat([y1, y2], dim=-1)


def alibi(num_heads: int, L: int, S: int, bugs: frozenset[str] = frozenset()) -> Tensor:
    """ALiBi's bias (H, L, S) for queries at the last L of S positions, as chapter 10 grades it (or
    with one of its known mistakes)."""
    slopes = 2.0 ** (-8.0 * torch.arange(1, num_heads + 1, dtype=torch.float64) / num_heads)
    if "alibi slopes reversed" in bugs:
        slopes = slopes.flip(0)
    back = torch.arange(S - L, S, dtype=torch.float64)[:, None] - torch.arange(S, dtype=torch.float64)[None, :]
    return -slopes[:, None, None] * back


class Run:
    """One forward pass of the contract's GPT over `state`, with a key/value cache per block kept
    between calls (cached use), and a set of known bugs switched on."""

    def __init__(self, state: dict[str, Tensor], spec: Spec, bugs: frozenset[str] = frozenset()):
        self.state, self.spec, self.bugs = state, spec, bugs
        self.cache: list[tuple[Tensor, Tensor] | None] = [None] * spec["num_layers"]

    def norm(self, x: Tensor, name: str) -> Tensor:
        s = self.state
        return F.layer_norm(x, x.shape[-1:], s[name + ".weight"], s[name + ".bias"])

    def attention(self, x: Tensor, i: int, cached: bool) -> Tensor:
        s, H, bugs = self.state, self.spec["num_heads"], self.bugs
        B, T, d = x.shape
        w = lambda name: s[f"blocks.{i}.attn.{name}.weight"]  # noqa: E731
        heads = lambda t: t.view(B, T, H, d // H).transpose(1, 2)  # noqa: E731 - (B, H, T, hd)
        q, k, v = heads(x @ w("w_q").T), heads(x @ w("w_k").T), heads(x @ w("w_v").T)
        start = self.cache[i][0].shape[-2] if cached and self.cache[i] is not None else 0
        where = torch.arange(T) + (0 if "positions restart" in bugs else start)
        if self.spec["positions"] == "rope" and "no positions" not in bugs:
            interleaved = "rope interleaved" in bugs
            q, k = rope(q, where, interleaved=interleaved), rope(k, where, interleaved=interleaved)
        if cached:
            if self.cache[i] is not None:
                k_all, v_all = torch.cat([self.cache[i][0], k], dim=-2), torch.cat([self.cache[i][1], v], dim=-2)
            else:
                k_all, v_all = k, v
            self.cache[i] = (k_all, v_all)
            if "cache returns the new keys only" not in bugs:
                k, v = k_all, v_all
        S = k.shape[-2]
        scale = 1 / math.sqrt(d if "scaled by d_model" in bugs else d // H)
        scores = q @ k.transpose(-2, -1) * scale
        if self.spec["positions"] == "alibi" and "no positions" not in bugs:
            scores = scores + alibi(H, T, S, bugs)
        future = torch.ones(T, S, dtype=torch.bool).triu(1 if "top-left mask" in bugs else S - T + 1)
        if not ("not causal" in bugs or ("mask without a cache only" in bugs and cached)):
            scores = scores.masked_fill(future, NEG_INF)
        out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, d)
        return out @ w("w_o").T

    def mlp(self, x: Tensor, i: int) -> Tensor:
        s, b = self.state, f"blocks.{i}.mlp."
        hidden = F.gelu(x @ s[b + "0.weight"].T + s[b + "0.bias"])
        return hidden @ s[b + "2.weight"].T + s[b + "2.bias"]

    def __call__(self, tokens: Tensor, cached: bool = False) -> Tensor:
        s, bugs = self.state, self.bugs
        head = s["head.weight"]
        x = (head if "tied" in bugs else s["embed.weight"])[tokens]  # a tied module loads head.weight last
        for i in range(self.spec["num_layers"]):
            b = f"blocks.{i}."
            if "post-norm" in bugs:
                x = self.norm(x + self.attention(x, i, cached), b + "norm1")
                x = self.norm(x + self.mlp(x, i), b + "norm2")
            else:
                x = x + self.attention(self.norm(x, b + "norm1"), i, cached)
                x = x + self.mlp(self.norm(x, b + "norm2"), i)
        if "no final norm" not in bugs:
            x = self.norm(x, "norm")
        return x @ head.T  # (B, T, vocab)


def parameter_count(spec: Spec) -> int:
    return sum(math.prod(shape) for shape in gpt_shapes(spec["vocab"], spec["d_model"], spec["num_layers"]).values())


def _gpt_reference(x: Inputs, spec: Spec) -> dict[str, Any]:
    return dict(logits=Run(x.extra["state"], spec)(x.args["tokens"]), parameters=parameter_count(spec))


GPT_BUGS = {
    "not causal": "Your attention is not causal: the logits at position i may depend on tokens 0 .. i only; mask "
                  "the scores of later keys with -inf before the softmax.",
    "post-norm": "Your blocks normalise after the residual sum (post-norm, as the Transformer of 2017): a GPT's "
                 "blocks are pre-norm, x + attn(norm1(x)), then x + mlp(norm2(x)).",
    "no final norm": "A pre-norm stack needs a LayerNorm after its last block (norm) before the head: its residual "
                     "stream is never normalised otherwise.",
    "no positions": "Your model ignores the order of the tokens: apply_rope to the queries and keys of every head "
                    "(positions='rope'), or add alibi_bias to the scores (positions='alibi').",
    "scaled by d_model": "Scale the scores by 1 / sqrt(head_dim), the size of one head (d_model // num_heads), not "
                         "of d_model.",
    "rope interleaved": "Your apply_rope pairs features (2i, 2i + 1): the course's convention (GPT-NeoX, Llama) "
                        "pairs feature i with i + D/2, the two halves of each head (assignment 10).",
    "alibi slopes reversed": "Your alibi_bias gives head 0 the gentlest slope: head h has m_h = 2^(-8 (h + 1) / H), "
                             "so head 0 is the steepest (assignment 10).",
    "tied": "Your head shares the embedding's weight (weight tying): the contract's head is its own "
            "nn.Linear(d_model, vocab_size, bias=False), so the model has vocab_size * d_model more parameters.",
}


ROPE_ONLY = {"rope interleaved", "positions restart"}
ALIBI_ONLY = {"alibi slopes reversed"}


def applies(bug: str, spec: Spec) -> bool:
    """Whether a known bug can show in a case: those of RoPE with RoPE's positions, ALiBi's with ALiBi's."""
    return bug not in (ALIBI_ONLY if spec["positions"] == "rope" else ROPE_ONLY)


def _gpt_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    tokens, state = x.args["tokens"], x.extra["state"]
    found = {bug: Mistake(hint, dict(logits=Run(state, spec, frozenset({bug}))(tokens), parameters=None))
             for bug, hint in GPT_BUGS.items() if bug != "tied" and applies(bug, spec)}
    d, V, layers = spec["d_model"], spec["vocab"], spec["num_layers"]
    found["tied"] = Mistake(GPT_BUGS["tied"], dict(logits=Run(state, spec, frozenset({"tied"}))(tokens),
                                                   parameters=parameter_count(spec) - V * d))
    # the logits are right (the check loads the weights it has): only the count tells
    found["biased projections"] = Mistake(
        "Your attention's projections have biases: the contract's w_q, w_k, w_v and w_o are "
        "nn.Linear(d_model, d_model, bias=False).", dict(logits=None, parameters=parameter_count(spec) + 4 * d * layers))
    return found


def _cached_reference(x: Inputs, spec: Spec) -> dict[str, Any]:
    return dict(logits=Run(x.extra["state"], spec)(x.args["tokens"]))  # one call on the whole sequence


CACHED_BUGS = {
    "positions restart": "Every chunk starts again at position 0: with a cache, the new tokens are at positions "
                         "len(cache) .. len(cache) + T - 1 (read len(cache) before cache.update), for apply_rope "
                         "as for the causal mask.",
    "top-left mask": "Your causal mask is aligned top-left (torch.ones(T, S).triu(1), or is_causal=True over a "
                     "cache): with S cached keys and T new queries, query i is at position S - T + i and may see "
                     "keys 0 .. S - T + i, so the mask is triu(S - T + 1): aligned bottom-right.",
    "cache returns the new keys only": "Your attention sees only the keys of the new tokens: cache.update(k, v) must "
                                       "return every position so far, the old ones followed by the new (assignment 09's "
                                       "KVCache), and the attention uses what it returns.",
    "mask without a cache only": "Your model masks the future only when it has no cache: a chunk of several tokens "
                                 "(the prompt) fed with a cache must be causal too.",
    # the same chunks as the bug above: the twins are named together (merge_twins), never one picked
    "not causal": GPT_BUGS["not causal"],
}


def _cached_run(x: Inputs, spec: Spec, bug: str) -> Tensor:
    run, tokens = Run(x.extra["state"], spec, frozenset({bug})), x.args["tokens"]
    chunks, start = [], 0
    for t in spec["steps"]:
        chunks.append(run(tokens[:, start:start + t], cached=True))
        start += t
    return torch.cat(chunks, dim=1)


def _cached_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    return {bug: Mistake(hint, dict(logits=_cached_run(x, spec, bug))) for bug, hint in CACHED_BUGS.items()
            if applies(bug, spec)}


# --------------------------------------------------------------------------
# train_step


def _train_run(x: Inputs, spec: Spec, bug: str | None = None) -> Tensor:
    model = ToyBigram(spec["vocab"], spec["L"]).to(torch.float64)
    model.load_state_dict(x.extra["state"])
    optimizer = torch.optim.SGD(model.parameters(), lr=spec["lr"])
    tokens, losses = x.args["tokens"], []
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    if bug == "targets not shifted":
        targets = tokens[:, :-1]
    for _ in range(spec["steps"]):
        logits = model(inputs)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                               reduction="sum" if bug == "summed" else "mean")
        if bug != "no zero_grad":
            optimizer.zero_grad()
        loss.backward()
        if bug != "no step":
            optimizer.step()
        losses.append(loss.item())
    return torch.tensor(losses, dtype=torch.float64)


TRAIN_BUGS = {
    "no zero_grad": "Your gradients pile up from one step to the next: call optimizer.zero_grad() in every step "
                    "(before backward), or each step applies the sum of all the gradients so far.",
    "no step": "The loss never moves: after loss.backward(), optimizer.step() applies the gradients to the weights.",
    "targets not shifted": "Your targets are the input tokens themselves: the model at position t predicts token "
                           "t + 1, so inputs = tokens[:, :-1] and targets = tokens[:, 1:].",
    "summed": "Your loss is the sum over the positions: F.cross_entropy's default, the mean over every position of "
              "every sequence, keeps the step's size independent of the batch's size.",
}


def _train_reference(x: Inputs, spec: Spec) -> dict[str, Any]:
    return dict(losses=_train_run(x, spec))


def _train_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    return {bug: Mistake(hint, dict(losses=_train_run(x, spec, bug))) for bug, hint in TRAIN_BUGS.items()}


# --------------------------------------------------------------------------
# generate


def _draw(logits: Tensor, spec: Spec, generator: torch.Generator, greedy: bool = False) -> Tensor:
    """Chapter 10's sample_next in float64: temperature, top-k, top-p, then torch.multinomial."""
    if greedy:
        return logits.argmax(-1)
    p = (logits / spec["temperature"]).softmax(-1)
    if spec["top_k"] is not None:
        kth = torch.topk(p, min(spec["top_k"], p.shape[-1]), dim=-1).values[..., -1:]
        p = p.masked_fill(p < kth, 0.0)
        p = p / p.sum(-1, keepdim=True)
    if spec["top_p"] is not None:
        sorted_p, index = torch.sort(p, dim=-1, descending=True)
        sorted_p = sorted_p.masked_fill(torch.cumsum(sorted_p, -1) - sorted_p >= spec["top_p"], 0.0)
        p = torch.zeros_like(p).scatter(-1, index, sorted_p)
        p = p / p.sum(-1, keepdim=True)
    return torch.multinomial(p, 1, generator=generator)[:, 0]


def _generated(x: Inputs, spec: Spec, bug: str | None = None, cached: bool = False) -> Tensor:
    """generate's new tokens (B, new), from whole sequences (or with one known bug; ``cached``: as
    the bug gives them with a cache, where the model sees the prompt once, then one token a step)."""
    model, tokens = ToyDecoder(x.extra["state"]), x.args["prompt"]
    generator = torch.Generator().manual_seed(x.extra["draw_seed"])
    new = []
    for step in range(spec["new"]):
        logits = model(tokens[:, -1:] if bug == "last token only" and step else tokens)
        # a chunk of one token has one position: its first is its last
        first = bug == "first position" and not (cached and step)
        row = logits[:, 0] if first else logits[:, -1]
        token = _draw(row, spec, generator, greedy=bug == "greedy")
        new.append(token)
        tokens = torch.cat([tokens, token[:, None]], dim=1)
    out = torch.stack(new, dim=1)
    return torch.cat([x.args["prompt"], out], dim=1) if bug == "prompt returned" else out


def _generate_reference(x: Inputs, spec: Spec) -> dict[str, Any]:
    tokens = _generated(x, spec)
    return {"tokens": tokens, "tokens with the cache": tokens}


GENERATE_BUGS = {
    "last token only": "Without the cache your model sees only the last token after the prompt: feed the whole "
                       "sequence so far (the prompt and every new token) and take the logits of its last position.",
    "first position": "You sample from the logits of the first position: the next token's are those of the last "
                      "one, logits[:, -1].",
    "greedy": "Your tokens are the most probable ones: generate draws them with sample_next(logits, temperature, "
              "top_k, top_p, generator), as chapter 10 does.",
    "prompt returned": "Return the new tokens only, (B, max_new_tokens), not the prompt before them.",
}


def _generate_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    found = {}
    for bug, hint in GENERATE_BUGS.items():
        tokens = _generated(x, spec, bug)
        cached = (None if bug == "last token only" else  # with a cache, the last token alone is right
                  _generated(x, spec, bug, cached=True) if bug == "first position" else tokens)
        found[bug] = Mistake(hint, {"tokens": tokens, "tokens with the cache": cached})
    if spec["temperature"] != 1.0:
        tokens = _generated(x, dict(spec, temperature=1.0))
        found["temperature ignored"] = Mistake(
            "Your tokens are drawn as if the temperature were 1: next_token_distribution divides the logits by the "
            "temperature before the softmax (assignment 10), and generate hands sample_next its temperature.",
            {"tokens": tokens, "tokens with the cache": tokens})
    return found


# --------------------------------------------------------------------------
# held_out_loss


HELD_OUT_BUGS = {
    "sees the future": (
        "Your model is not causal: once trained, its predictions at a position change when a later token changes, "
        "or its held-out loss is lower than any causal model can reach on this source. It sees the token it "
        "predicts (no causal mask, or a mask that lets position i see i + 1).",
        {"causal": False}),
    "does not learn": (
        "Your model learns (almost) nothing in the check's 200 steps: its parameters must be registered "
        "(nn.ModuleList, not a Python list) for the optimizer to see them, forward must return logits (not "
        "probabilities), and gradients must reach every weight (no .detach(), no torch.no_grad() in forward).",
        {"causal": True, "below the uniform guess": False, "beyond the last symbol": False, "within the budget": False}),
    "no context": (
        "Your model learns which symbol follows which, but no more: each symbol of this source depends on the two "
        "before it, so attention must reach the earlier token, at the right distance (check the positions: "
        "apply_rope on queries and keys, or alibi_bias added to the scores).",
        {"causal": True, "below the uniform guess": True, "beyond the last symbol": False, "within the budget": False}),
    "slow": (
        "Your model learns the source, beyond what the last symbol tells, but more slowly than the contract's: "
        "after the check's steps its held-out loss is above the budget, which the contract's model meets from "
        "any initialisation. GPT's own tests compare your model with the contract's, part by part.",
        {"causal": True, "below the uniform guess": True, "beyond the last symbol": True, "within the budget": False}),
}


def _held_out_reference(x: Inputs, spec: Spec) -> dict[str, Any]:
    return {"causal": True, "below the uniform guess": True, "beyond the last symbol": True, "within the budget": True}


def _held_out_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    return {bug: Mistake(hint, dict(outputs)) for bug, (hint, outputs) in HELD_OUT_BUGS.items()}


ANSWERS = {
    "GPT": Answer(_gpt_reference, _gpt_mistakes),
    "cached_forward": Answer(_cached_reference, _cached_mistakes),
    "train_step": Answer(_train_reference, _train_mistakes),
    # the generator decides every case's draws: tokens drawn another way earn nothing for their shape
    "generate": Answer(_generate_reference, _generate_mistakes, structure_share=0.0),
    "held_out_loss": Answer(_held_out_reference, _held_out_mistakes),
}
