"""The decoder-only language model of chapter 10, and how it chooses its words.

- ``apply_rope``, ``alibi_bias``: rotary positions (Su et al., 2021, the halves convention of
  GPT-NeoX and of Hugging Face's Llama) and ALiBi's linear biases (Press et al., 2022), as the
  exercise defines them.
- ``CharGPT``: a small decoder-only Transformer over characters (pre-norm blocks as in GPT-2),
  with one of four ways to tell positions apart: ``"learned"``, ``"sinusoidal"`` (chapter 06),
  ``"rope"`` or ``"alibi"``.
- ``course_text``: the training text, this course's own chapters 01 to 08 without their code,
  so nothing is downloaded; ``CharData`` turns it into ids and random training windows.
- ``trained_models``: the four models trained with the same seed, data and steps, from a cache
  on disk when the same code and text trained them before (``cache_key``), with their CPU time.
- ``next_token_distribution``, ``generate``, ``beam_search``: temperature, top-k and top-p
  sampling, and beam search with length normalisation, as the exercise defines them.
"""
from __future__ import annotations

import hashlib
import inspect
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

import learning
import transformer as course

__all__ = ["apply_rope", "alibi_bias", "CharGPT", "course_text", "CharData", "SETTINGS", "POSITIONS",
           "trained_models", "cache_key", "loss_by_position", "next_token_distribution", "generate",
           "beam_search"]

BOOK = Path(__file__).resolve().parent
POSITIONS = ("learned", "sinusoidal", "rope", "alibi")
SETTINGS = dict(d_model=64, nhead=4, num_layers=2, dim_feedforward=128, context=32, max_len=128,
                batch_size=32, steps=400, warmup=40, lr=5e-3, init_seed=0, data_seed=1)


# --------------------------------------------------------------------------
# positions


def apply_rope(x, positions, base=10000.0):
    """Rotate feature pairs (i, i + D/2) of every row by the angle position * base^(-2i/D).

    x (..., L, D), D even; positions (L,) integers; returns (..., L, D), like x.
    """
    half = x.shape[-1] // 2
    theta = base ** (-2 * torch.arange(half, device=x.device, dtype=x.dtype) / x.shape[-1])  # (D/2,)
    angle = positions.to(x.dtype)[:, None] * theta  # (L, D/2)
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :half], x[..., half:]  # pair i is (x1[i], x2[i])
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def alibi_bias(num_heads, L, S):
    """(num_heads, L, S): -m_h * (i + S - L - j), slopes m_h = 2^(-8 (h + 1) / H), head 0 the steepest."""
    slopes = 2.0 ** (-8.0 * torch.arange(1, num_heads + 1) / num_heads)  # (H,)
    distance = (torch.arange(L) + S - L)[:, None] - torch.arange(S)[None, :]  # (L, S): how far back key j is
    return -slopes[:, None, None] * distance


# --------------------------------------------------------------------------
# the model


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention; RoPE rotates queries and keys, ALiBi biases the scores."""

    def __init__(self, d_model, nhead, position):
        super().__init__()
        self.nhead, self.position = nhead, position
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, L, E = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.nhead, E // self.nhead).permute(2, 0, 3, 1, 4)  # (B, H, L, d) each
        if self.position == "rope":
            positions = torch.arange(L, device=x.device)
            q, k = apply_rope(q, positions), apply_rope(k, positions)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, L, L)
        if self.position == "alibi":
            scores = scores + alibi_bias(self.nhead, L, L).to(scores)
        scores = scores.masked_fill(course.causal_mask(L, device=x.device), float("-inf"))
        attn = torch.softmax(scores, -1)  # (B, H, L, L)
        return self.out((attn @ v).transpose(1, 2).reshape(B, L, E))  # heads side by side again


class Block(nn.Module):
    """A pre-norm decoder block (GPT-2): x + attention(LN(x)), then x + MLP(LN(x)); no cross-attention."""

    def __init__(self, d_model, nhead, dim_feedforward, position):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, nhead, position)
        self.mlp = nn.Sequential(nn.Linear(d_model, dim_feedforward), nn.GELU(), nn.Linear(dim_feedforward, d_model))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class CharGPT(nn.Module):
    """Token ids (B, L) -> logits (B, L, vocab) of each next character.

    position: "learned" (a table of max_len vectors added to the embeddings), "sinusoidal" (the
    fixed encoding of chapter 06, added), "rope" (queries and keys rotated in every layer) or
    "alibi" (a distance penalty on every score); the last two add nothing to the embeddings.
    """

    def __init__(self, vocab_size, position, d_model=64, nhead=4, num_layers=2, dim_feedforward=128, max_len=128):
        super().__init__()
        if position not in POSITIONS:
            raise ValueError(f"position must be one of {POSITIONS}, not {position!r}")
        self.position = position
        self.embed = nn.Embedding(vocab_size, d_model)
        if position == "learned":
            self.pos_embed = nn.Embedding(max_len, d_model)
        elif position == "sinusoidal":
            self.register_buffer("pe", course.positional_encoding(max_len, d_model), persistent=False)
        self.blocks = nn.ModuleList(Block(d_model, nhead, dim_feedforward, position) for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, ids):
        x = self.embed(ids)  # (B, L, E)
        L = ids.shape[1]
        if self.position == "learned":
            x = x + self.pos_embed(torch.arange(L, device=ids.device))
        elif self.position == "sinusoidal":
            x = x + self.pe[:L]
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))  # (B, L, vocab)


# --------------------------------------------------------------------------
# the text: the course's own chapters


def course_text(chapters=range(1, 9)) -> str:
    """The prose of the book's chapters (front matter, code cells, figures and directives left out),
    with every character outside printable ASCII written as '?'."""
    parts = []
    for number in chapters:
        (path,) = BOOK.glob(f"{number:02d}-*.md")
        body = path.read_text(encoding="utf-8").split("\n---\n", 1)[1]  # after the front matter
        body = re.sub(r"^(`{3,}).*?^\1\s*$", "", body, flags=re.S | re.M)  # fenced blocks: code, figures, notes
        body = re.sub(r"^\(.*\)=\s*$", "", body, flags=re.M)  # labels
        parts.append(re.sub(r"\n{3,}", "\n\n", body).strip())
    text = "\n\n".join(parts)
    return "".join(c if c == "\n" or " " <= c <= "~" else "?" for c in text)


@dataclass
class CharData:
    """The text as ids: the first 90% to train on, the rest held out."""

    text: str

    def __post_init__(self):
        self.chars = sorted(set(self.text))
        self.index = {c: i for i, c in enumerate(self.chars)}
        ids = self.encode(self.text)
        split = int(0.9 * len(ids))
        self.train, self.valid = ids[:split], ids[split:]

    def encode(self, text: str) -> torch.Tensor:
        return torch.tensor([self.index[c] for c in text])

    def decode(self, ids) -> str:
        return "".join(self.chars[i] for i in ids)

    def windows(self, ids: torch.Tensor, gen: torch.Generator, n: int, length: int) -> torch.Tensor:
        """n random windows of length + 1 ids: the inputs and, one step on, the targets."""
        starts = torch.randint(len(ids) - length - 1, (n,), generator=gen)
        return torch.stack([ids[s:s + length + 1] for s in starts.tolist()])  # (n, length + 1)


def lm_loss(model, batch):
    """Next-character cross-entropy, every position at once (the causal mask hides the future)."""
    logits = model(batch[:, :-1])  # (B, L, vocab)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))


# --------------------------------------------------------------------------
# training, once per code and text


def cache_key(text: str) -> str:
    """A hash of everything the trained weights depend on: the settings, the text, this module's code,
    the functions it uses from the course's other modules, and the torch version."""
    used = (course.positional_encoding, course.causal_mask, learning.train, learning.seed_everything)
    parts = [repr(sorted(SETTINGS.items())), text, torch.__version__, Path(__file__).read_text(),
             *(inspect.getsource(f) for f in used)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _cache_dir() -> Path | None:
    """$COURSE_MODEL_CACHE (empty: no cache); in a clone, _build/trained-models; elsewhere
    ~/.cache/attention-from-scratch (as chapter 08's model)."""
    if "COURSE_MODEL_CACHE" in os.environ:
        return Path(os.environ["COURSE_MODEL_CACHE"]) if os.environ["COURSE_MODEL_CACHE"] else None
    repo = BOOK.parent
    if (repo / "_config.yml").is_file():
        return repo / "_build" / "trained-models"
    return Path.home() / ".cache" / "attention-from-scratch"


def _warmup_then_decay(step: int) -> float:
    steps, warmup = SETTINGS["steps"], SETTINGS["warmup"]
    return min((step + 1) / warmup, (steps - step) / (steps - warmup))


def _new_model(vocab_size: int, position: str) -> CharGPT:
    learning.seed_everything(SETTINGS["init_seed"])  # the same initial weights on every build
    keys = ("d_model", "nhead", "num_layers", "dim_feedforward", "max_len")
    return CharGPT(vocab_size, position, **{k: SETTINGS[k] for k in keys})


def trained_models(data: CharData, cache: Path | None | str = "default") -> tuple[dict[str, CharGPT], dict]:
    """The four models, one per kind of position, trained on data.train with the same seed, batches
    and steps; returns (models, runs) with runs[position] = {"losses", "seconds", "cpu_seconds",
    "cached"}. The weights are kept in `cache` (None: train, keep nothing) under cache_key."""
    cache = _cache_dir() if cache == "default" else cache
    path = None if cache is None else Path(cache) / f"chargpt-{cache_key(data.text)}.pt"
    models = {p: _new_model(len(data.chars), p) for p in POSITIONS}
    if path is not None and path.is_file():
        saved = torch.load(path, weights_only=True)
        for position, model in models.items():
            model.load_state_dict(saved["state_dicts"][position])
            model.eval()
        return models, {p: dict(saved["runs"][p], cached=True) for p in POSITIONS}
    runs = {}
    for position, model in models.items():
        learning.seed_everything(SETTINGS["init_seed"])
        cpu_start = time.process_time()
        run = learning.train(model, lambda gen: data.windows(data.train, gen, SETTINGS["batch_size"],
                                                             SETTINGS["context"]),
                             lm_loss, steps=SETTINGS["steps"], lr=SETTINGS["lr"], seed=SETTINGS["data_seed"],
                             schedule=_warmup_then_decay)
        runs[position] = dict(run, cpu_seconds=time.process_time() - cpu_start, cached=False)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")  # another build may write the same file
        torch.save({"state_dicts": {p: m.state_dict() for p, m in models.items()},
                    "runs": {p: {k: v for k, v in r.items() if k != "cached"} for p, r in runs.items()}}, partial)
        os.replace(partial, path)
    return models, runs


@torch.no_grad()
def loss_by_position(model: CharGPT, data: CharData, length: int, n: int = 32, seed: int = 2) -> torch.Tensor:
    """The mean held-out loss at each position of n windows of `length` characters: (length,)."""
    batch = data.windows(data.valid, torch.Generator().manual_seed(seed), n, length)
    logits = model(batch[:, :-1])
    losses = F.cross_entropy(logits.transpose(1, 2), batch[:, 1:], reduction="none")  # (n, length)
    return losses.mean(0)


# --------------------------------------------------------------------------
# choosing the next token


def next_token_distribution(logits, temperature=1.0, top_k=None, top_p=None):
    """(..., V) logits -> (..., V) probabilities: softmax(logits / T), then top-k, then top-p,
    each renormalised; top-p keeps a token when the tokens more probable than it sum to < top_p."""
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_k is not None:
        kth = probs.topk(min(top_k, probs.shape[-1]), dim=-1).values[..., -1:]  # the k-th largest
        probs = torch.where(probs >= kth, probs, torch.zeros_like(probs))
        probs = probs / probs.sum(-1, keepdim=True)
    if top_p is not None:
        ordered, order = probs.sort(dim=-1, descending=True)
        before = ordered.cumsum(dim=-1) - ordered  # what the more probable tokens hold together
        ordered = torch.where(before < top_p, ordered, torch.zeros_like(ordered))
        probs = torch.zeros_like(probs).scatter(-1, order, ordered)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


@torch.no_grad()
def generate(model: CharGPT, prompt: torch.Tensor, steps: int, generator: torch.Generator,
             temperature=1.0, top_k=None, top_p=None) -> torch.Tensor:
    """prompt (L,) ids -> (L + steps,): each next id drawn from the last position's distribution,
    given at most the last SETTINGS["context"] ids (the length of the training windows)."""
    ids = prompt
    for _ in range(steps):
        logits = model(ids[None, -SETTINGS["context"]:])[0, -1]  # (vocab,)
        probs = next_token_distribution(logits, temperature, top_k, top_p)
        ids = torch.cat([ids, torch.multinomial(probs, 1, generator=generator)])
    return ids


@torch.no_grad()
def beam_search(step_fn, start, beam_size, max_len, eos):
    """Keep the beam_size best hypotheses by total log-probability; one that ends with eos leaves the
    beam; the best of the finished and the active ones by total / generated tokens.

    step_fn((N, t) ids) -> (N, V) log-probabilities of the next id; start: a list of ids (the prompt)
    the hypotheses begin with. Returns (generated ids, their mean log-probability)."""
    active, finished = [(list(start), 0.0)], []
    for _ in range(max_len):
        if not active:
            break
        logp = step_fn(torch.tensor([ids for ids, _ in active]))  # (N, V)
        vocab = logp.shape[-1]
        scores = torch.tensor([score for _, score in active], dtype=logp.dtype)[:, None] + logp  # (N, V)
        best = scores.flatten().topk(min(beam_size, scores.numel()))  # over every hypothesis and token
        extended = [(active[i // vocab][0] + [i % vocab], s) for s, i in zip(best.values.tolist(), best.indices.tolist())]
        finished += [h for h in extended if h[0][-1] == eos]
        active = [h for h in extended if h[0][-1] != eos]
    ids, total = max(finished + active, key=lambda h: h[1] / (len(h[0]) - len(start)))
    return ids[len(start):], total / (len(ids) - len(start))
