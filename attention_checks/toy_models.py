"""The fixed models some checks hand the student's code: data and a forward pass, no learning.

Here rather than in the assignment's module because the grader's tests on a student's outputs
(``answers.fits``) run them too, and those sit below the assignment modules.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

Tensor = torch.Tensor


class ToyTranslator(nn.Module):
    """A small fixed causal model for greedy decoding: model(src (B, S), tgt_in (B, t)) -> (B, t, vocab).

    Position i's logits depend on the source and on tgt_in[:, :i+1] only (a lower-triangular
    mixing of the target's embeddings), as a decoder with a causal mask; float64."""

    def __init__(self, state: dict[str, Tensor]):
        super().__init__()
        for name, value in state.items():
            self.register_buffer(name, value.to(torch.float64))

    def forward(self, src, tgt_in):
        T, S = tgt_in.shape[1], src.shape[1]
        s = F.embedding(src.long(), self.src_embed)  # (B, S, D)
        t = F.embedding(tgt_in.long(), self.tgt_embed)  # (B, T, D)
        h = self.mix[:T, :T].tril() @ t + self.cross[:T, :S] @ s  # (B, T, D): causal in the target
        return 3 * torch.tanh(h) @ self.out  # (B, T, vocab)
