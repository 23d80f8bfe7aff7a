"""The course's own Transformer, in one importable place.

Each piece is the one a chapter builds and checks against PyTorch; chapter 08
imports them from here to assemble an encoder-decoder model that learns:

- ch03 ``scaled_dot_product_attention``      (F.scaled_dot_product_attention)
- ch04 ``MultiHeadAttention``                 (nn.MultiheadAttention, batch first)
- ch05 ``padding_mask``, ``causal_mask``      (True = may not attend)
- ch06 ``LayerNorm``, ``positional_encoding``, ``EncoderLayer``, ``Encoder``
- ch08 ``DecoderLayer``, ``Decoder``, ``Transformer`` (nn.TransformerDecoderLayer,
  nn.TransformerDecoder, nn.Transformer, all with ``batch_first=True``), and
  ``Seq2Seq`` (embeddings + positions + ``Transformer`` + output layer),
  ``shift_right`` (teacher forcing) and ``greedy_decode`` (inference).

Parameter names follow PyTorch's modules, so every class loads their
``state_dict``; ``tests`` of the book check that it does and that the outputs agree.
Masks follow nn.MultiheadAttention: boolean ``True`` = not allowed, a float
mask is added to the scores.
"""
from __future__ import annotations

import copy
import math

import torch
import torch.nn as nn

__all__ = ["scaled_dot_product_attention", "MultiHeadAttention", "padding_mask", "causal_mask",
           "LayerNorm", "positional_encoding", "EncoderLayer", "Encoder", "DecoderLayer",
           "Decoder", "Transformer", "Seq2Seq", "shift_right", "greedy_decode"]


# ---- chapter 03 -------------------------------------------------------------------------------

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout=None):
    """softmax(q k^T / sqrt(d) + mask) v; attn_mask: bool (True = not allowed) or float (added).

    query (..., L, d), key (..., S, d), value (..., S, dv) -> (output (..., L, dv), weights (..., L, S))
    """
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])  # (..., L, S)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    weights = torch.softmax(scores, dim=-1)
    if dropout is not None:
        weights = dropout(weights)
    return weights @ value, weights


# ---- chapter 05 -------------------------------------------------------------------------------

def padding_mask(tokens, pad_id=0):
    """(B, S) token ids -> (B, S) bool, True at padding (the key_padding_mask convention)."""
    return tokens == pad_id


def causal_mask(size, device=None):
    """(size, size) bool, True above the diagonal: position i may not look at j > i."""
    return torch.ones(size, size, dtype=torch.bool, device=device).triu(1)


def _as_bool(mask):
    # nn.MultiheadAttention accepts -inf/0 float masks too; the course uses booleans
    return mask if mask is None or mask.dtype == torch.bool else mask == float("-inf")


# ---- chapter 04 -------------------------------------------------------------------------------

class MultiHeadAttention(nn.Module):
    """nn.MultiheadAttention(embed_dim, num_heads, dropout, batch_first=True), same parameters."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True):
        super().__init__()
        assert embed_dim % num_heads == 0, "embed_dim must be divisible by num_heads"
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))  # W_Q; W_K; W_V
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim)) if bias else None
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)  # W^O
        self.attn_dropout = nn.Dropout(dropout)
        nn.init.xavier_uniform_(self.in_proj_weight)  # PyTorch's initialisation
        if bias:
            nn.init.zeros_(self.out_proj.bias)

    def forward(self, query, key, value, key_padding_mask=None, attn_mask=None, need_weights=True,
                average_attn_weights=True):
        B, L, E = query.shape
        S, H = key.shape[1], self.num_heads
        w_q, w_k, w_v = self.in_proj_weight.chunk(3)
        b_q, b_k, b_v = self.in_proj_bias.chunk(3) if self.in_proj_bias is not None else (None,) * 3
        # project, then split E into H heads of E/H features: (B, H, len, E/H)
        q = nn.functional.linear(query, w_q, b_q).view(B, L, H, E // H).transpose(1, 2)
        k = nn.functional.linear(key, w_k, b_k).view(B, S, H, E // H).transpose(1, 2)
        v = nn.functional.linear(value, w_v, b_v).view(B, S, H, E // H).transpose(1, 2)
        mask = None  # merged as nn.MultiheadAttention merges them (chapter 05): (B|1, 1, L|1, S)
        if attn_mask is not None:
            mask = _as_bool(attn_mask)[None, None]  # (1, 1, L, S)
        if key_padding_mask is not None:
            pad = _as_bool(key_padding_mask)[:, None, None, :]  # (B, 1, 1, S)
            mask = pad if mask is None else mask | pad
        out, weights = scaled_dot_product_attention(q, k, v, mask, self.attn_dropout)  # (B, H, L, E/H)
        out = self.out_proj(out.transpose(1, 2).reshape(B, L, E))  # merge the heads: (B, L, E)
        if not need_weights:
            return out, None
        return out, weights.mean(1) if average_attn_weights else weights


# ---- chapter 06 -------------------------------------------------------------------------------

class LayerNorm(nn.Module):
    """nn.LayerNorm(d): each token standardised over its features (biased variance)."""

    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        mu = x.mean(-1, keepdim=True)
        var = x.var(-1, keepdim=True, unbiased=False)
        return (x - mu) / torch.sqrt(var + self.eps) * self.weight + self.bias


def positional_encoding(max_len, d_model):
    """(max_len, d_model): sin(pos * w_i) on even features, cos(pos * w_i) on odd ones."""
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    omega = torch.exp(-torch.arange(0, d_model, 2) * math.log(10000.0) / d_model)  # (d/2,)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * omega), torch.cos(pos * omega)
    return pe


class EncoderLayer(nn.Module):
    """Post-norm encoder layer, nn.TransformerEncoderLayer(batch_first=True) with ReLU."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, nhead, dropout)
        self.linear1, self.linear2 = nn.Linear(d_model, dim_feedforward), nn.Linear(dim_feedforward, d_model)
        self.norm1, self.norm2 = LayerNorm(d_model), LayerNorm(d_model)
        self.dropout, self.dropout1, self.dropout2 = (nn.Dropout(dropout) for _ in range(3))

    def forward(self, src, src_mask=None, src_key_padding_mask=None):
        a = self.self_attn(src, src, src, key_padding_mask=src_key_padding_mask, attn_mask=src_mask,
                           need_weights=False)[0]
        x = self.norm1(src + self.dropout1(a))
        f = self.linear2(self.dropout(torch.relu(self.linear1(x))))
        return self.norm2(x + self.dropout2(f))


class Encoder(nn.Module):
    """nn.TransformerEncoder: deep copies of `layer` in `layers`, then an optional final norm."""

    def __init__(self, layer, num_layers, norm=None):
        super().__init__()
        self.layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(num_layers))
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None):
        for layer in self.layers:
            src = layer(src, src_mask=mask, src_key_padding_mask=src_key_padding_mask)
        return src if self.norm is None else self.norm(src)


# ---- chapter 08 -------------------------------------------------------------------------------

class DecoderLayer(nn.Module):
    """Post-norm decoder layer, nn.TransformerDecoderLayer(batch_first=True) with ReLU.

    tgt (B, T, E), memory (B, S, E) -> (B, T, E). The cross-attention's averaged weights
    (B, T, S) of the last call are kept in `cross_weights` (for pictures; not a parameter).
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, nhead, dropout)  # target looks at target
        self.multihead_attn = MultiHeadAttention(d_model, nhead, dropout)  # target looks at source
        self.linear1, self.linear2 = nn.Linear(d_model, dim_feedforward), nn.Linear(dim_feedforward, d_model)
        self.norm1, self.norm2, self.norm3 = LayerNorm(d_model), LayerNorm(d_model), LayerNorm(d_model)
        self.dropout, self.dropout1, self.dropout2, self.dropout3 = (nn.Dropout(dropout) for _ in range(4))
        self.cross_weights = None

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None):
        # 1. masked self-attention: causal mask + the target's padding
        a = self.self_attn(tgt, tgt, tgt, key_padding_mask=tgt_key_padding_mask, attn_mask=tgt_mask,
                           need_weights=False)[0]
        x = self.norm1(tgt + self.dropout1(a))
        # 2. cross-attention: queries from the target, keys and values from the source
        c, self.cross_weights = self.multihead_attn(x, memory, memory, attn_mask=memory_mask,
                                                    key_padding_mask=memory_key_padding_mask)
        x = self.norm2(x + self.dropout2(c))
        # 3. position-wise feed-forward network
        f = self.linear2(self.dropout(torch.relu(self.linear1(x))))
        return self.norm3(x + self.dropout3(f))


class Decoder(nn.Module):
    """nn.TransformerDecoder: deep copies of `layer`, each given the same memory and masks."""

    def __init__(self, layer, num_layers, norm=None):
        super().__init__()
        self.layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(num_layers))
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None):
        for layer in self.layers:
            tgt = layer(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask)
        return tgt if self.norm is None else self.norm(tgt)


class Transformer(nn.Module):
    """nn.Transformer(..., batch_first=True): encoder and decoder stacks, each with a final norm."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1):
        super().__init__()
        self.encoder = Encoder(EncoderLayer(d_model, nhead, dim_feedforward, dropout), num_encoder_layers,
                               LayerNorm(d_model))
        self.decoder = Decoder(DecoderLayer(d_model, nhead, dim_feedforward, dropout), num_decoder_layers,
                               LayerNorm(d_model))
        for p in self.parameters():  # nn.Transformer's initialisation of every matrix
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None):
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask)  # (B, S, E)
        return self.decoder(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                            memory_key_padding_mask)  # (B, T, E)


def shift_right(tgt, start_token):
    """Teacher forcing's decoder input: start_token, then the target without its last token.

    tgt (B, T) -> (B, T); position t of the result holds the token the decoder has seen
    before it must predict tgt[:, t].
    """
    start = torch.full_like(tgt[:, :1], start_token)
    return torch.cat([start, tgt[:, :-1]], dim=1)


class Seq2Seq(nn.Module):
    """Token ids in, logits out: embeddings * sqrt(E) + positions, a Transformer, a linear layer."""

    def __init__(self, vocab_size, d_model=64, nhead=4, num_layers=2, dim_feedforward=128, dropout=0.0,
                 max_len=64, pad_id=0):
        super().__init__()
        self.pad_id, self.d_model = pad_id, d_model
        self.src_embed = nn.Embedding(vocab_size, d_model)
        self.tgt_embed = nn.Embedding(vocab_size, d_model)
        self.transformer = Transformer(d_model, nhead, num_layers, num_layers, dim_feedforward, dropout)
        self.generator = nn.Linear(d_model, vocab_size)
        self.register_buffer("pe", positional_encoding(max_len, d_model), persistent=False)

    def embed(self, embedding, ids):
        return embedding(ids) * math.sqrt(self.d_model) + self.pe[: ids.shape[1]]  # (B, len, E)

    def encode(self, src):
        src_pad = padding_mask(src, self.pad_id)
        memory = self.transformer.encoder(self.embed(self.src_embed, src), src_key_padding_mask=src_pad)
        return memory, src_pad

    def decode(self, tgt_in, memory, src_pad):
        T = tgt_in.shape[1]
        out = self.transformer.decoder(self.embed(self.tgt_embed, tgt_in), memory,
                                       tgt_mask=causal_mask(T, tgt_in.device),  # no peeking ahead
                                       tgt_key_padding_mask=padding_mask(tgt_in, self.pad_id),
                                       memory_key_padding_mask=src_pad)  # no attending to source padding
        return self.generator(out)  # (B, T, vocab)

    def forward(self, src, tgt_in):
        """src (B, S), tgt_in (B, T) token ids -> logits (B, T, vocab)."""
        memory, src_pad = self.encode(src)
        return self.decode(tgt_in, memory, src_pad)


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
