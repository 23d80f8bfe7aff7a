"""Chapter 10's decoder-only character language models, trained at build time, and the experiments
that need working versions of the functions the exercise grades; the page loads the results
(book/data/chargpt.pt, ``generation.load_results``).

- ``apply_rope``, ``alibi_bias``: rotary positions (Su et al., 2021, the halves convention of
  GPT-NeoX and Llama) and ALiBi's linear biases (Press et al., 2022), as the exercise defines them.
- ``CharGPT``: a small decoder-only Transformer over characters (pre-norm blocks as in GPT-2),
  with one of four ways to tell positions apart: ``"learned"``, ``"sinusoidal"`` (chapter 06),
  ``"rope"`` or ``"alibi"``.
- ``course_text``: the prose of chapters 01 to 08, from which the versioned training text
  book/data/course-text-vN.txt was written (``write_course_text``); the models train on that
  file, so editing the chapters does not retrain them.
- ``next_token_distribution``, ``generate``, ``beam_search``: temperature, top-k and top-p
  sampling, and beam search with length normalisation, as the exercise defines them.
- ``build``: everything chapter 10 shows, as data.
"""
from __future__ import annotations

import math
import re
import sys
import time
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

import generation
import learning
from coursebuild import BOOK
from coursebuild.reversal import positional_encoding
from generation import POSITIONS, SETTINGS, CharData

# What decides the stored results: the code that trains and evaluates, and the training text.
SOURCES = ["coursebuild/chargpt.py", "coursebuild/reversal.py", "book/generation.py", "book/learning.py",
           f"book/data/{generation.TEXT}"]
STEPS = len(POSITIONS) * SETTINGS["steps"]


def causal_mask(size, device=None):
    """(size, size) bool, True above the diagonal: query i may not attend to a key j > i."""
    rows = torch.arange(size, device=device)
    return rows[None, :] > rows[:, None]


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
        scores = scores.masked_fill(causal_mask(L, device=x.device), float("-inf"))
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
            self.register_buffer("pe", positional_encoding(max_len, d_model), persistent=False)
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


def write_course_text(version: int) -> None:
    """Write book/data/course-text-v<version>.txt from the chapters as they are now; then set
    generation.TEXT to its name (the models retrain once, on the new text)."""
    (BOOK / "data" / f"course-text-v{version}.txt").write_text(course_text(), encoding="utf-8")


def lm_loss(model, batch):
    """Next-character cross-entropy, every position at once (the causal mask hides the future)."""
    logits = model(batch[:, :-1])  # (B, L, vocab)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))


# --------------------------------------------------------------------------
# training


def _warmup_then_decay(step: int) -> float:
    steps, warmup = SETTINGS["steps"], SETTINGS["warmup"]
    return min((step + 1) / warmup, (steps - step) / (steps - warmup))


def _new_model(vocab_size: int, position: str) -> CharGPT:
    learning.seed_everything(SETTINGS["init_seed"])  # the same initial weights on every build
    keys = ("d_model", "nhead", "num_layers", "dim_feedforward", "max_len")
    return CharGPT(vocab_size, position, **{k: SETTINGS[k] for k in keys})


def trained_models(data: CharData, progress: Callable[[int], None]) -> tuple[dict[str, CharGPT], dict]:
    """The four models, one per kind of position, trained on data.train with the same seed, batches
    and steps; returns (models, runs) with runs[position] = {"losses", "seconds", "cpu_seconds"}.
    ``progress(1)`` after every step."""
    models = {p: _new_model(len(data.chars), p) for p in POSITIONS}
    runs = {}
    for position, model in models.items():
        learning.seed_everything(SETTINGS["init_seed"])
        cpu_start = time.process_time()
        run = learning.train(model, lambda gen: data.windows(data.train, gen, SETTINGS["batch_size"],
                                                             SETTINGS["context"]),
                             lambda model, batch: (progress(1), lm_loss(model, batch))[1],
                             steps=SETTINGS["steps"], lr=SETTINGS["lr"], seed=SETTINGS["data_seed"],
                             schedule=_warmup_then_decay)
        runs[position] = dict(run, cpu_seconds=time.process_time() - cpu_start)
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
    with at most SETTINGS["context"] ids of context (the windows the models were trained on)."""
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


# --------------------------------------------------------------------------
# what chapter 10 shows

# two contexts: one where the next character is all but certain (the end of "key"), one at the start
# of a word, where many are likely: top-p keeps few characters after the first, many after the second
SAMPLING = dict(prompts=["Attention compares every query with every k", "Attention compares every query with the "],
                temperatures=[0.3, 0.5, 0.7, 1.0, 1.3, 1.6, 2.0], top_ks=[None, 1, 2, 3, 5, 10],
                top_ps=[None, 0.5, 0.7, 0.9, 0.95])
SAMPLES = [("greedy (temperature 0.01)", dict(temperature=0.01)), ("temperature 0.5", dict(temperature=0.5)),
           ("temperature 1.0", dict(temperature=1.0)), ("temperature 1.5", dict(temperature=1.5)),
           ("top-k 5", dict(top_k=5)), ("top-p 0.9", dict(top_p=0.9))]


def rope_figures() -> dict:
    """Scores of rotated random queries and keys at six positions and 100 later (the same up to
    rounding), the (16, 16) scores of one query and one key at positions 0..15, and the score of
    equal content (all ones, 64 features) against the distance, 0..256."""
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(6, 16, generator=gen), torch.randn(6, 16, generator=gen)
    positions = torch.tensor([0, 1, 2, 5, 9, 30])
    scores = apply_rope(q, positions) @ apply_rope(k, positions).T  # (6, 6)
    moved = apply_rope(q, positions + 100) @ apply_rope(k, positions + 100).T
    one_q, one_k = torch.randn(32, generator=gen), torch.randn(32, generator=gen)
    grid = torch.arange(16)
    toeplitz = apply_rope(one_q.expand(16, -1), grid) @ apply_rope(one_k.expand(16, -1), grid).T
    ones = torch.ones(64)
    distances = torch.arange(0, 257)
    decay = apply_rope(ones.expand(len(distances), -1), torch.zeros_like(distances))[0] @ \
        apply_rope(ones.expand(len(distances), -1), distances).T  # (257,)
    return dict(positions=positions, scores=scores, moved=moved, toeplitz=toeplitz, distances=distances, decay=decay)


def sampling_figure(lm: CharGPT, data: CharData) -> dict:
    """The next-character distribution after each prompt for every temperature, top-k and top-p:
    logits (prompts, vocab), probabilities (prompts, temperatures, top-ks, top-ps, vocab)."""
    ids = torch.stack([data.encode(prompt)[-SETTINGS["context"]:] for prompt in SAMPLING["prompts"]])
    with torch.no_grad():
        logits = lm(ids)[:, -1]  # (prompts, vocab)
    grid = torch.stack([torch.stack([torch.stack([torch.stack([next_token_distribution(row, t, k, p)
                                                               for p in SAMPLING["top_ps"]])
                                                  for k in SAMPLING["top_ks"]])
                                     for t in SAMPLING["temperatures"]]) for row in logits])
    return dict(SAMPLING, logits=logits, probabilities=grid)


def beam_comparison(lm: CharGPT, data: CharData) -> list[list]:
    """The first 60 held-out words of 5+ letters, cut after 2 letters, completed greedily (beam 1)
    and by beam search (beam 4) up to the next space: [cut, the true rest, greedy text, its mean
    log-probability, beam text, its mean log-probability] for each."""
    context, space = SETTINGS["context"], data.index[" "]

    def log_probs(ids):
        with torch.no_grad():
            return torch.log_softmax(lm(ids[:, -context:])[:, -1], dim=-1)

    valid_text = data.decode(data.valid.tolist())
    cuts = [m.start() + 2 for m in re.finditer(r"(?<= )[a-z]{5,}(?= )", valid_text)]
    results = []
    for cut in [c for c in cuts if c >= context][:60]:
        prompt_ids = data.encode(valid_text[cut - context:cut]).tolist()
        truth = valid_text[cut:valid_text.index(" ", cut) + 1]  # the rest of the word, and the space
        greedy_ids, greedy_score = beam_search(log_probs, prompt_ids, 1, 12, space)
        beam_ids, beam_score = beam_search(log_probs, prompt_ids, 4, 12, space)
        results.append([cut, truth, data.decode(greedy_ids), greedy_score, data.decode(beam_ids), beam_score])
    return results


def build(progress: Callable[[int], None]) -> dict:
    """Train the four models and run every experiment of chapter 10 on them."""
    learning.seed_everything(0)
    figures = dict(rope=rope_figures(), alibi=dict(bias=alibi_bias(8, 12, 12), last_row=alibi_bias(8, 1, 64)[:, 0]))
    data = CharData(generation.load_text())
    models, runs = trained_models(data, progress)
    eval_start = time.process_time()
    lm = models["rope"]
    return dict(
        figures,
        runs=runs,
        params=sum(p.numel() for p in lm.parameters()),
        by_position={p: loss_by_position(models[p], data, SETTINGS["max_len"]) for p in POSITIONS},
        sampling=sampling_figure(lm, data),
        samples={name: data.decode(generate(lm, data.encode("Attention"), 120, torch.Generator().manual_seed(1),
                                            **options).tolist()) for name, options in SAMPLES},
        beam=beam_comparison(lm, data),
        eval_cpu_seconds=time.process_time() - eval_start,
    )


if __name__ == "__main__":
    # python -m coursebuild.chargpt write-text N: a new version of the training text
    if sys.argv[1:2] == ["write-text"]:
        write_course_text(int(sys.argv[2]))
