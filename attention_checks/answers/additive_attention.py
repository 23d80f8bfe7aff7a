"""How 07-additive-attention is judged: references and known mistakes of AdditiveAttention and
LSTMAttentionPooling, from the formulas in float64 on the CPU (the LSTM outputs they start from
come from nn.LSTM itself, in the case's inputs)."""
from __future__ import annotations

import math

import torch

from ..cases import Inputs, Spec
from .catalogue import Answer, Mistake, swapped_outputs

NEG_INF = float("-inf")

NO_TANH = "Did you forget the tanh? The score is v · tanh(W_q q + W_k k): tanh acts on the hidden features, before v."
PADDING_GOT_WEIGHT = ("Padding positions got weight: fill the scores of the keys where key_padding_mask is True "
                      "with -inf before the softmax, so that their weight is exactly 0.")
MASK_INVERTED = ("Your mask is inverted: key_padding_mask is True at padding (the keys to hide), as in chapter 05, "
                 "not at the keys that may be attended.")
MASK_AFTER_SOFTMAX = ("Mask the scores before the softmax: zeroing weights after it leaves rows that no longer sum "
                      "to 1.")
MASK_WITH_ZERO = "Masked scores must become -inf before the softmax (weight exactly 0), not 0, which is an ordinary score."


def _masked(scores: torch.Tensor, mask: torch.Tensor | None, fill: float = NEG_INF) -> torch.Tensor:
    """Scores (B, ..., S) with keys where mask (B, S) is True filled; mask None: unchanged."""
    if mask is None:
        return scores
    view = mask.view(mask.shape[0], *[1] * (scores.dim() - 2), mask.shape[1])
    return scores.masked_fill(view, fill)


def _mask_mistakes(scores: torch.Tensor, mask: torch.Tensor | None, finish) -> dict[str, Mistake]:
    """The usual ways to get the padding mask wrong; finish(weights) -> the outputs."""
    if mask is None:
        return {}
    view = mask.view(mask.shape[0], *[1] * (scores.dim() - 2), mask.shape[1])
    found = {"padding ignored": Mistake(PADDING_GOT_WEIGHT, finish(scores.softmax(-1))),
             "mask with 0": Mistake(MASK_WITH_ZERO, finish(_masked(scores, mask, 0.0).softmax(-1))),
             "mask after softmax": Mistake(MASK_AFTER_SOFTMAX, finish(scores.softmax(-1).masked_fill(view, 0.0)))}
    # a full-length row has no key left under the inverted mask: nan there, as the buggy code gives
    found["mask inverted"] = Mistake(MASK_INVERTED, finish(_masked(scores, ~mask).softmax(-1)))
    return found


# --------------------------------------------------------------------------
# AdditiveAttention


def _additive_parts(x: Inputs):
    state = x.extra["state"]
    w_q, w_k, v = state["w_q.weight"], state["w_k.weight"], state["v.weight"][0]  # (h, dq), (h, dk), (h,)
    q, k = x.args["query"], x.args["key"]
    hidden = (q @ w_q.T).unsqueeze(2) + (k @ w_k.T).unsqueeze(1)  # (B, L, S, h)
    return hidden, v


def _additive_finish(value: torch.Tensor):
    return lambda weights: dict(output=weights @ value, weights=weights)


def _additive_reference(x: Inputs, spec: Spec) -> dict[str, torch.Tensor]:
    hidden, v = _additive_parts(x)
    scores = _masked(torch.tanh(hidden) @ v, x.kwargs.get("key_padding_mask"))  # (B, L, S)
    return _additive_finish(x.args["value"])(scores.softmax(-1))


def _additive_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    hidden, v = _additive_parts(x)
    mask, finish = x.kwargs.get("key_padding_mask"), _additive_finish(x.args["value"])
    scores = torch.tanh(hidden) @ v  # (B, L, S)
    h = v.numel()

    def weights_of(s, dim=-1):
        return _masked(s, mask).softmax(dim)

    found = {
        "no tanh": Mistake(NO_TANH, finish(weights_of(hidden @ v))),
        "tanh after v": Mistake("tanh goes on the hidden features, before v: the score is v · tanh(W_q q + W_k k), "
                                "not tanh(v · (W_q q + W_k k)).", finish(weights_of(torch.tanh(hidden @ v)))),
        "relu": Mistake("The hidden layer's activation is tanh, not ReLU.", finish(weights_of(hidden.relu() @ v))),
        "scaled": Mistake("Additive attention has no 1/sqrt(d) scaling: the tanh already bounds the scores.",
                          finish(weights_of(scores / math.sqrt(h)))),
        "softmax axis": Mistake("Your weights are normalised over the queries: the softmax runs over the keys (the "
                                "last dimension), so that every row of the weights sums to 1.",
                                finish(_masked(scores, mask).softmax(-2))),
        "no v": Mistake("The hidden features must be turned into one score by v: score = v · tanh(W_q q + W_k k), "
                        "not the sum of tanh(...).", finish(weights_of(torch.tanh(hidden).sum(-1)))),
        "weights before softmax": Mistake("The weights you return are the scores: return their softmax over the keys.",
                                          dict(weights=_masked(scores, mask))),
    }
    state = x.extra["state"]
    if state["w_q.weight"].shape == state["w_k.weight"].shape:  # only then can the two be swapped
        swapped = (x.args["query"] @ state["w_k.weight"].T).unsqueeze(2) + \
                  (x.args["key"] @ state["w_q.weight"].T).unsqueeze(1)
        found["swapped"] = Mistake("W_q projects the queries and W_k the keys; yours seem swapped.",
                                   finish(weights_of(torch.tanh(swapped) @ v)))
    found.update(_mask_mistakes(scores, mask, finish))
    if x.args["key"].shape[-1] == x.args["value"].shape[-1]:
        found["weights @ key"] = Mistake("The weights average the values: output = weights @ value, not @ key.",
                                         dict(output=expected["weights"] @ x.args["key"]))
    found.update(swapped_outputs(expected, "Your forward"))
    return found


# --------------------------------------------------------------------------
# LSTMAttentionPooling


def pooling(outputs: torch.Tensor, query_state: torch.Tensor, state: dict[str, torch.Tensor], num_heads: int,
            score: str, mask: torch.Tensor | None, *, dot_scale: float | None = None, additive_scale: float = 1.0,
            activation=torch.tanh, split: str = "heads first", softmax_dim: int = -1, out_proj: bool = True,
            mask_fill: float = NEG_INF, mask_after: bool = False, use_mask: bool = True,
            unprojected: tuple[str, ...] = (), value_proj: str = "w_v"):
    """Attention pooling of ``outputs`` (B, D, E) with the query W_Q query_state (B, E), in float64;
    the keyword arguments make the known mistakes (split: "heads first" is right; "interleaved"
    reads head h from every H-th feature; "steps mixed" views the keys and values (B, D, E) as
    (B, H, D, d) without a transpose; "merged interleaved" splits right but concatenates feature
    by feature; unprojected: which of "w_q", "w_k", "w_v" is left out; value_proj: the projection that
    makes the values). Returns dict(pooled (B, E),
    weights (B, H, D))."""
    B, D, E = outputs.shape
    H, d = num_heads, E // num_heads

    def heads(t):  # (..., E) -> (..., H, d); "interleaved" reads the features the wrong way round
        return t.unflatten(-1, (H, d)) if split != "interleaved" else t.unflatten(-1, (d, H)).transpose(-2, -1)

    def project(t, name):
        return t if name in unprojected else t @ state[f"{name}.weight"].T

    query = heads(project(query_state, "w_q")).unsqueeze(1)  # (B, 1, H, d)
    keys = heads(project(outputs, "w_k"))  # (B, D, H, d)
    values = heads(project(outputs, value_proj))  # (B, D, H, d)
    if split == "steps mixed":  # (B, D, E).view(B, H, D, d), then read as (B, D, H, d)
        keys, values = (project(outputs, name).reshape(B, H, D, d).transpose(1, 2) for name in ("w_k", value_proj))
    if score == "dot":
        scale = 1 / math.sqrt(d) if dot_scale is None else dot_scale
        scores = (query * keys).sum(-1) * scale  # (B, D, H)
    else:
        scores = (activation(query + keys) * state["v"]).sum(-1) * additive_scale  # (B, D, H)
    scores = scores.transpose(1, 2)  # (B, H, D)
    if mask is not None and use_mask and not mask_after:
        scores = _masked(scores, mask, mask_fill)
    weights = scores.softmax(softmax_dim)
    if mask is not None and mask_after:
        weights = weights.masked_fill(mask[:, None, :], 0.0)
    z = (weights.unsqueeze(-1) * values.transpose(1, 2)).sum(-2)  # (B, H, d)
    merged = z.transpose(1, 2).flatten(1) if split in ("interleaved", "merged interleaved") else z.flatten(1)  # (B, E)
    pooled = merged @ state["w_o.weight"].T if out_proj else merged
    return dict(pooled=pooled, weights=weights)


def _pooling_args(x: Inputs, spec: Spec):
    return x.args["outputs"], x.extra["state"], spec["num_heads"], spec["score"], x.kwargs.get("key_padding_mask")


def _pooling_reference(x: Inputs, spec: Spec) -> dict[str, torch.Tensor]:
    outputs, state, H, score, mask = _pooling_args(x, spec)
    return pooling(outputs, x.args["h_n"][-1], state, H, score, mask)


def _pooling_mistakes(x: Inputs, spec: Spec, expected) -> dict[str, Mistake]:
    outputs, state, H, score, mask = _pooling_args(x, spec)
    h_n = x.args["h_n"]
    E = outputs.shape[-1]
    right_query = h_n[-1]

    def like(**changes):
        kw = dict(query_state=right_query)
        kw.update(changes)
        return pooling(outputs, kw.pop("query_state"), state, H, score, mask, **kw)

    found = {
        "first output": Mistake("The query must come from the last hidden state h_n[-1], not the first output "
                                "outputs[:, 0].", like(query_state=outputs[:, 0])),
        "mean output": Mistake("The query must come from the last hidden state h_n[-1], not the mean of the outputs.",
                               like(query_state=outputs.mean(1))),
    }
    if h_n.shape[0] > 1:
        found["first layer"] = Mistake("h_n[0] is the first layer's state: the query comes from the top layer, "
                                       "h_n[-1] (the layer whose outputs you attend over).", like(query_state=h_n[0]))
    if mask is not None:
        found["last output"] = Mistake("With padding, outputs[:, -1] is a padding position (zeros): the query must "
                                       "come from h_n[-1], each text's state at its own last token.",
                                       like(query_state=outputs[:, -1]))
    d = E // H
    if score == "dot":
        found["no scale"] = Mistake("Scale the dot-product scores by 1/sqrt(d_k), d_k the size of one head.",
                                    like(dot_scale=1.0))
        if H > 1:
            found["scale by E"] = Mistake("d_k is the size of one head, hidden_size // num_heads, not hidden_size: "
                                          "scale by 1/sqrt(hidden_size // num_heads).",
                                          like(dot_scale=1 / math.sqrt(E)))
        found["divide by d"] = Mistake("Scale by 1/sqrt(d_k), not 1/d_k.", like(dot_scale=1 / d))
    else:
        found["no tanh"] = Mistake(NO_TANH, like(activation=lambda t: t))
        found["scaled"] = Mistake("Additive scores are not scaled: drop the 1/sqrt(d_k) (the source's code divides by "
                                  "it; this exercise follows Bahdanau, whose tanh already bounds the scores).",
                                  like(additive_scale=1 / math.sqrt(d)))
    found["no out proj"] = Mistake("Apply w_o to the concatenated heads (for one head too): pooled = w_o(concat).",
                                   like(out_proj=False))
    found["softmax axis"] = Mistake("The softmax runs over the time steps (the last dimension of the (B, H, D) "
                                    "scores), so that each head's weights sum to 1 over the text.",
                                    like(softmax_dim=1))
    for name, role in (("w_v", "values"), ("w_k", "keys")):
        found[f"no {name}"] = Mistake(f"Your {role} are the LSTM outputs themselves: the {role} are {name}(outputs) "
                                      f"(the projection {name} is part of the pooling, as w_q for the query and w_o "
                                      "for the result).", like(unprojected=(name,)))
    found["values are keys"] = Mistake("Your values are the keys, w_k(outputs): the values have their own "
                                       "projection, w_v(outputs).", like(value_proj="w_k"))
    found["no w_q"] = Mistake("Your query is h_n[-1] itself: the query is w_q(h_n[-1]).", like(unprojected=("w_q",)))
    if H > 1:
        found["interleaved heads"] = Mistake("Head h takes the features h·d_k to (h+1)·d_k - 1: split with "
                                             "view(..., num_heads, d_k) and concatenate head 0 first.",
                                             like(split="interleaved"))
        found["steps mixed"] = Mistake("Your heads mix the time steps: the keys and values (B, D, E) viewed as "
                                       "(B, num_heads, D, d_k) at once take each head's rows from several steps; "
                                       "view them as (B, D, num_heads, d_k), then transpose(1, 2).",
                                       like(split="steps mixed"))
        found["merged interleaved"] = Mistake("Your heads are split right but concatenated feature by feature: "
                                              "pooled = w_o of head 0's d_k features, then head 1's, ... "
                                              "(z of (B, num_heads, d_k) flattened as it is, or "
                                              "torch.cat(heads, dim=-1)).", like(split="merged interleaved"))
        found["weights averaged"] = Mistake("Return the weights of every head, (B, num_heads, D), not their average.",
                                            dict(weights=expected["weights"].mean(1)))
    else:
        found["weights squeezed"] = Mistake("Return the weights as (B, num_heads, D), with the head dimension "
                                            "(of size 1 here).", dict(weights=expected["weights"][:, 0]))
    if mask is not None:
        found["padding ignored"] = Mistake(PADDING_GOT_WEIGHT, like(use_mask=False))
        found["mask with 0"] = Mistake(MASK_WITH_ZERO, like(mask_fill=0.0))
        found["mask after softmax"] = Mistake(MASK_AFTER_SOFTMAX, like(mask_after=True))
    found.update(swapped_outputs(expected, "Your forward"))
    return found


ANSWERS = {
    "AdditiveAttention": Answer(_additive_reference, _additive_mistakes),
    "LSTMAttentionPooling": Answer(_pooling_reference, _pooling_mistakes),
}
