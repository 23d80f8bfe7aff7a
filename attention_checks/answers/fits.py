"""Tests on a student's outputs, for the mistakes that are not one output to compare (a decoder
that samples its tokens, a training run that stops learning, tokens drawn without the case's
generator): a mistake names one of them and gives its arguments as data (``judging.Fit``),
computed by the references. They compute no answer (they are handed the right one), so they ship
with the checks: a student's notebook recognises these mistakes as the grader does, from the
published data.

Each test takes the student's outputs (name -> value) and its arguments, and says whether the
mistake explains them.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import torch

from ..core import tolerance
from ..toy_models import ToyTranslator

Tensor = torch.Tensor


def shift_with_another_start(got: Mapping[str, Any], right: Tensor, start: int) -> bool:
    """Tokens shifted right as they should be, with something else than ``start`` in column 0."""
    out = got.get("output")
    return (isinstance(out, Tensor) and tuple(out.shape) == tuple(right.shape) and not out.is_floating_point()
            and bool((out[:, 1:].cpu() == right[:, 1:]).all()) and bool((out[:, 0].cpu() != start).any()))


def sampled_tokens(got: Mapping[str, Any], right: Tensor, src: Tensor, start: int, state: dict[str, Tensor]) -> bool:
    """Tokens of the right shape and vocabulary, not all the argmax of ToyTranslator(``state``) given
    the tokens before them, but as likely on average as a sampler's (an argmin or an index of
    another axis is not)."""
    out = got.get("output")
    if not isinstance(out, Tensor) or tuple(out.shape) != tuple(right.shape) or out.is_floating_point():
        return False
    out = out.cpu().long()
    model = ToyTranslator(state).eval()
    vocab = model.out.shape[-1]
    if out.numel() == 0 or out.min() < 0 or out.max() >= vocab:
        return False
    first = torch.full_like(out[:, :1], start)
    with torch.no_grad():  # the model is causal: one pass gives each step's logits after the student's tokens
        probs = model(src, torch.cat([first, out[:, :-1]], dim=1)).softmax(-1)  # (B, n, vocab)
    chosen = probs.gather(-1, out[..., None])[..., 0]
    return bool((probs.argmax(-1) != out).any()) and chosen.mean().item() > 1 / vocab


def _curve(got: Mapping[str, Any], right: Tensor) -> Tensor | None:
    """The student's losses as float64 on the CPU, when they are a finite curve of the right length."""
    losses = got.get("losses")
    if not isinstance(losses, Tensor) or tuple(losses.shape) != tuple(right.shape) or not losses.is_floating_point():
        return None
    losses = losses.detach().to("cpu", torch.float64)
    return losses if bool(losses.isfinite().all()) else None


def _same(a: Tensor, b: Tensor) -> bool:
    return torch.allclose(a, b, **tolerance(torch.float32))  # as the losses are judged


def first_loss_differs(got: Mapping[str, Any], right: Tensor) -> bool:
    losses = _curve(got, right)
    return losses is not None and not _same(losses[:1], right[:1])


def learns_less(got: Mapping[str, Any], right: Tensor) -> bool:
    """The first loss right, the last one higher."""
    losses = _curve(got, right)
    return losses is not None and _same(losses[:1], right[:1]) and bool(losses[-1] > right[-1])


def learns_otherwise(got: Mapping[str, Any], right: Tensor) -> bool:
    """The first loss right, the curve another."""
    losses = _curve(got, right)
    return losses is not None and _same(losses[:1], right[:1])


def possible_draws(got: Mapping[str, Any], probs: Tensor) -> bool:
    """Integer tokens, one per row of ``probs`` (..., vocab), each of nonzero probability."""
    tokens = got.get("tokens")
    if not isinstance(tokens, Tensor) or tokens.is_floating_point() or tokens.shape != probs.shape[:-1]:
        return False
    tokens = tokens.detach().to("cpu", torch.int64)
    if bool(((tokens < 0) | (tokens >= probs.shape[-1])).any()):
        return False
    return bool((probs.gather(-1, tokens[..., None]) > 0).all())


FITS: dict[str, Callable[..., bool]] = {test.__name__: test for test in [
    shift_with_another_start, sampled_tokens, first_loss_differs, learns_less, learns_otherwise, possible_draws]}
