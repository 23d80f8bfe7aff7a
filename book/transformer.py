"""The encoder-decoder model of chapter 08, in one importable place.

The chapters build every piece of a Transformer by hand and check it against PyTorch;
the exercises ask you to do the same. The model that the book *trains* is therefore
made of PyTorch's own ``nn.Transformer``, the reference that all those checks compare
with, wrapped with what a model adds around it:

- ``padding_mask``, ``causal_mask``: boolean masks in ``nn.MultiheadAttention``'s
  convention (``True`` = may not attend), as in chapter 05;
- ``positional_encoding``: the sinusoids of chapter 06;
- ``Seq2Seq``: token embeddings + positions, ``nn.Transformer`` with its masks, and a
  linear layer to scores over the vocabulary;
- ``shift_right`` (teacher forcing) and ``greedy_decode`` (generation), as in chapter 08.

``tests/test_book_modules.py`` holds every attention and every layer of the model equal
to PyTorch's with float masks (``-inf`` and the sources' ``-1e9``) and boolean masks of
both of PyTorch's conventions.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn

__all__ = ["padding_mask", "causal_mask", "positional_encoding", "Seq2Seq", "shift_right",
           "greedy_decode"]


def padding_mask(tokens, pad_id=0):
    """(B, S) token ids -> (B, S) bool, True at padding (nn.MultiheadAttention's key_padding_mask)."""
    return tokens.eq(pad_id)


def causal_mask(size, device=None):
    """(size, size) bool, True above the diagonal: query i may not attend to a key j > i.

    The boolean twin of nn.Transformer.generate_square_subsequent_mask (-inf above the diagonal).
    """
    rows = torch.arange(size, device=device)
    return rows[None, :] > rows[:, None]  # (size, size): key index > query index


def positional_encoding(max_len, d_model):
    """(max_len, d_model) float32: sin(pos * w_i) at feature 2i, cos(pos * w_i) at 2i + 1,
    with w_i = 10000^(-2i / d_model) (Vaswani et al., 2017, section 3.5)."""
    frequencies = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)  # (d/2,)
    angles = torch.outer(torch.arange(max_len, dtype=torch.float32), frequencies)  # (max_len, d/2)
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)  # interleave: sin, cos, ...


def shift_right(tgt, start_token):
    """Teacher forcing's decoder input: start_token, then the target without its last token.

    tgt (B, T) -> (B, T); position t of the result holds the token the decoder has seen
    before it must predict tgt[:, t].
    """
    start = torch.full_like(tgt[:, :1], start_token)
    return torch.cat([start, tgt[:, :-1]], dim=1)


class Seq2Seq(nn.Module):
    """Token ids in, logits out: embeddings + positions, nn.Transformer, a linear layer.

    The embeddings are *not* multiplied by sqrt(d_model). The paper does, because its
    embeddings start small (std about d_model^-1/2); nn.Embedding starts them at std 1, and
    the factor would make the token vectors sqrt(d_model) times longer than the positional
    encoding and saturate the first softmax before training starts (chapter 06).
    """

    def __init__(self, vocab_size, d_model=64, nhead=4, num_layers=2, dim_feedforward=128, dropout=0.0,
                 max_len=64, pad_id=0):
        super().__init__()
        self.pad_id = pad_id
        self.src_embed = nn.Embedding(vocab_size, d_model)
        self.tgt_embed = nn.Embedding(vocab_size, d_model)
        encoder = nn.TransformerEncoder(  # nn.Transformer's own, except that a padded batch stays a
            nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, batch_first=True),
            num_layers, nn.LayerNorm(d_model), enable_nested_tensor=False)  # plain tensor in inference
        self.transformer = nn.Transformer(d_model, nhead, num_layers, num_layers, dim_feedforward, dropout,
                                          batch_first=True, custom_encoder=encoder)
        self.generator = nn.Linear(d_model, vocab_size)
        self.register_buffer("pe", positional_encoding(max_len, d_model), persistent=False)

    def embed(self, embedding, ids):
        return embedding(ids) + self.pe[: ids.shape[1]]  # (B, len, E)

    def encode(self, src):
        """src (B, S) ids -> the memory (B, S, E) and the source's padding mask (B, S)."""
        src_pad = padding_mask(src, self.pad_id)
        memory = self.transformer.encoder(self.embed(self.src_embed, src), src_key_padding_mask=src_pad)
        return memory, src_pad

    def decode(self, tgt_in, memory, src_pad):
        """tgt_in (B, T) ids, the memory and the source's padding -> logits (B, T, vocab)."""
        out = self.transformer.decoder(self.embed(self.tgt_embed, tgt_in), memory,
                                       tgt_mask=causal_mask(tgt_in.shape[1], tgt_in.device),  # no peeking
                                       tgt_key_padding_mask=padding_mask(tgt_in, self.pad_id),
                                       memory_key_padding_mask=src_pad)  # no attending to source padding
        return self.generator(out)

    def forward(self, src, tgt_in):
        """src (B, S), tgt_in (B, T) token ids -> logits (B, T, vocab)."""
        return self.decode(tgt_in, *self.encode(src))


@torch.no_grad()
def greedy_decode(model, src, start_token, max_len):
    """Generate max_len tokens one at a time, each time feeding back the model's own best guess.

    src (B, S) -> (B, max_len). The encoder runs once; the decoder reruns on the growing prefix.
    """
    memory, src_pad = model.encode(src)
    out = torch.full_like(src[:, :1], start_token)  # (B, 1): the start token
    for _ in range(max_len):
        logits = model.decode(out, memory, src_pad)  # (B, t, vocab)
        next_token = logits[:, -1].argmax(-1, keepdim=True)  # (B, 1): the last position's prediction
        out = torch.cat([out, next_token], dim=1)
    return out[:, 1:]
