"""The encoder-decoder model of chapter 08, in one importable place.

The chapters build every piece of a Transformer by hand and check it against PyTorch;
the exercises ask you to do the same. The model that the book *trains* is therefore
made of PyTorch's own ``nn.Transformer``, the reference that all those checks compare
with, wrapped with what a model adds around it: token embeddings plus the sinusoidal
positional encoding of chapter 06 (a buffer that comes with the trained weights), and a
linear layer to scores over the vocabulary. ``Seq2Seq.generate`` decodes greedily with
the model's own encoder and decoder.

The model is trained at build time (``python -m coursebuild.models``); chapters 08 and 09
load its weights from book/data/ (``learning.load_reversal``).
``tests/test_book_modules.py`` holds every attention and every layer of the model equal to
PyTorch's, with the masks of chapter 05.
"""
from __future__ import annotations

import torch
import torch.nn as nn

__all__ = ["Seq2Seq"]


class Seq2Seq(nn.Module):
    """Token ids in, logits out: embeddings + positions, nn.Transformer, a linear layer.

    The embeddings are *not* multiplied by sqrt(d_model). The paper does, because its
    embeddings start small (std about d_model^-1/2); nn.Embedding starts them at std 1, and
    the factor would make the token vectors sqrt(d_model) times longer than the positional
    encoding and saturate the first softmax before training starts (chapter 06).

    Masks are boolean in nn.MultiheadAttention's convention (True = may not attend): the
    padding of the source and of the target (``pad_id``), and the causal mask of the target,
    which is nn.Transformer's own ``generate_square_subsequent_mask`` (-inf above the diagonal).
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
        # the positional encoding (max_len, d_model): saved with the weights, filled when they are loaded
        self.register_buffer("pe", torch.zeros(max_len, d_model))

    def embed(self, embedding, ids):
        return embedding(ids) + self.pe[: ids.shape[1]]  # (B, len, E)

    def encode(self, src):
        """src (B, S) ids -> the memory (B, S, E) and the source's padding mask (B, S)."""
        src_pad = src.eq(self.pad_id)
        memory = self.transformer.encoder(self.embed(self.src_embed, src), src_key_padding_mask=src_pad)
        return memory, src_pad

    def decode(self, tgt_in, memory, src_pad):
        """tgt_in (B, T) ids, the memory and the source's padding -> logits (B, T, vocab)."""
        future = nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1], device=tgt_in.device).isinf()
        out = self.transformer.decoder(self.embed(self.tgt_embed, tgt_in), memory,
                                       tgt_mask=future,  # no peeking
                                       tgt_key_padding_mask=tgt_in.eq(self.pad_id),
                                       memory_key_padding_mask=src_pad)  # no attending to source padding
        return self.generator(out)

    def forward(self, src, tgt_in):
        """src (B, S), tgt_in (B, T) token ids -> logits (B, T, vocab)."""
        return self.decode(tgt_in, *self.encode(src))

    @torch.no_grad()
    def generate(self, src, start_token, steps):
        """Greedy decoding: src (B, S) -> (B, steps) ids, each the argmax of the last position's
        logits given the tokens before it. The encoder runs once; the decoder reruns on the
        growing prefix."""
        memory, src_pad = self.encode(src)
        out = torch.full_like(src[:, :1], start_token)  # (B, 1): the start token
        for _ in range(steps):
            logits = self.decode(out, memory, src_pad)  # (B, t, vocab)
            out = torch.cat([out, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        return out[:, 1:]
