"""Chapter 08's reversal Transformer, trained at build time; chapters 08 and 09 load the result.

The data, the settings and the schedule are the book's (book/learning.py), the model is the
book's ``Seq2Seq`` (book/transformer.py, PyTorch's ``nn.Transformer`` inside); what is here is
what the exercises grade and the book therefore does not publish: the sinusoidal positional
encoding, teacher forcing's shifted input and greedy decoding with a plain ``model(src, tgt_in)``.
"""
from __future__ import annotations

import time
from typing import Callable

import torch
import torch.nn.functional as F

import learning
import transformer as course
from learning import PAD, REVERSAL, START, VOCAB

# What decides the stored results: the files whose code trains the model.
SOURCES = ["coursebuild/reversal.py", "book/transformer.py", "book/learning.py"]


def positional_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """(max_len, d_model): sin(pos * w_i) at feature 2i, cos(pos * w_i) at 2i + 1, w_i = 10000^(-2i/d)."""
    frequencies = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    angles = torch.outer(torch.arange(max_len, dtype=torch.float32), frequencies)
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)


def shift_right(tgt: torch.Tensor, start_token: int) -> torch.Tensor:
    """Teacher forcing's decoder input: start_token, then tgt without its last token."""
    return torch.cat([torch.full_like(tgt[:, :1], start_token), tgt[:, :-1]], dim=1)


def reversal_model() -> course.Seq2Seq:
    """The untrained model: seeded, so its random weights are the same on every build."""
    learning.seed_everything(REVERSAL["init_seed"])
    model = course.Seq2Seq(**REVERSAL["model"])
    model.pe.copy_(positional_encoding(*model.pe.shape))
    return model.eval()


def reversal_loss(model, batch):
    """Teacher forcing: cross-entropy of every target position at once, padding ignored."""
    src, tgt = batch
    logits = model(src, shift_right(tgt, START))  # (B, 9, VOCAB)
    return F.cross_entropy(logits.reshape(-1, VOCAB), tgt.reshape(-1), ignore_index=PAD)


def build(progress: Callable[[int], None]) -> dict:
    """Train the model; the weights before and after, the run, and what chapter 08 shows of it.
    ``progress(n)`` is called after every n training steps."""
    untrained = reversal_model()
    initial = {k: v.clone() for k, v in untrained.state_dict().items()}
    model = reversal_model()
    test_src, test_tgt = learning.held_out_sequences()
    decoded_before = model.generate(test_src, START, test_tgt.shape[1])
    cpu_start = time.process_time()

    def loss(model, batch):
        progress(1)
        return reversal_loss(model, batch)

    run = learning.train(model, learning.training_batch, loss, steps=REVERSAL["steps"], lr=REVERSAL["lr"],
                         seed=REVERSAL["data_seed"], schedule=learning.warmup_then_decay)
    run.update(cpu_seconds=time.process_time() - cpu_start,
               test_tgt_in=shift_right(test_tgt, START),
               decoded_before=decoded_before,
               decoded_after=model.generate(test_src, START, test_tgt.shape[1]))
    return {"untrained": initial, "trained": model.state_dict(), "run": run}


STEPS = REVERSAL["steps"]
