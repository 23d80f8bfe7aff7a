"""What is specific to 11-your-gpt's checks: the reference model agrees with PyTorch's own layers and
attention, run whole or chunk by chunk; the contract's names are the solution's; the course's toy
models are honest (cached and uncached agree); the held-out source scores its entropy rate under
its own probabilities; models that cannot look back, or that look ahead, get the verdicts and hints
meant for them; and every known mistake shows in a visible case.
(Layout, full marks, stub and corpus: tests/test_declared_checks.py and tests/test_grading.py.)"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from attention_checks.answers.judging import judged
from attention_checks.core import case_seed, generator
from attention_checks.answers.your_gpt import Run, alibi, parameter_count, rope
from attention_checks.your_gpt import (
    SYMBOLS,
    ToyDecoder,
    check_cached_forward,
    check_generate,
    check_gpt,
    check_held_out_loss,
    check_train_step,
    entropy_rates,
    gpt_shapes,
    markov_source,
    one_thread,
    trained_held_out_loss,
)
from autograder.instructor.functional import CODE_CELL, cell_options, cell_parts, definitions
from classroom import REPO
from classroom.notebook import SourceNotebook, check_report

NB = SourceNotebook("11-your-gpt")
CHECKS = [check_gpt, check_cached_forward, check_train_step, check_generate, check_held_out_loss]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.name)
def test_every_known_mistake_is_told_apart_by_a_visible_case(check):
    assert NB.uncaught_mistakes(check) == set()


def _visible_cases(check) -> list[dict]:
    return [spec for gid, cell in NB.tests.items() if gid not in NB.hidden() and f"{check.function_name}(" in cell.source
            for spec in NB.cases(gid)]


@pytest.fixture(scope="module")
def chapter_11() -> dict:
    """What the answer cells of book/11-your-gpt.md define (the parts of 09 and 10 the page repeats,
    and 11's own), run in the order of the page."""
    text = (REPO / "book" / "11-your-gpt.md").read_text(encoding="utf-8")
    cells = [cell_parts(cell["body"])[1] for cell in CODE_CELL.finditer(text)
             if any(tag.startswith("answers:") for tag in cell_options(cell["body"]).get("tags") or [])]
    namespace = dict(torch=torch, nn=nn, F=F, math=math)
    exec(compile(definitions("\n\n".join(cells)), "11-your-gpt.md", "exec"), namespace)  # noqa: S102 - the book's own
    return namespace


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.name)
def test_the_books_model_is_the_graded_answer(chapter_11, check):
    """The page trains and samples with what the assignment grades: its code earns every visible case."""
    student = chapter_11["GPT" if check.kind == "class" else check.name]
    cases = _visible_cases(check)[:1] if check is check_held_out_loss else _visible_cases(check)
    points, report = check_report(check, student, cases, points=1)
    assert points == 1, report


# --------------------------------------------------------------------------
# the reference model


def torch_gpt(state: dict[str, torch.Tensor], spec: dict, tokens: torch.Tensor) -> torch.Tensor:
    """The contract's GPT from PyTorch's own pieces (nn.LayerNorm, nn.GELU, scaled_dot_product_attention
    with the ALiBi bias and the causal mask as one float mask), in float64."""
    d, H = spec["d_model"], spec["num_heads"]
    norm = lambda x, name: F.layer_norm(x, (d,), state[name + ".weight"], state[name + ".bias"])  # noqa: E731
    x = F.embedding(tokens, state["embed.weight"])
    B, T, _ = x.shape
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for i in range(spec["num_layers"]):
        b = f"blocks.{i}."
        h = norm(x, b + "norm1")
        q, k, v = (F.linear(h, state[b + f"attn.{w}.weight"]).view(B, T, H, d // H).transpose(1, 2)
                   for w in ("w_q", "w_k", "w_v"))
        if spec["positions"] == "rope":
            q, k = rope(q, torch.arange(T)), rope(k, torch.arange(T))
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            mask = alibi(H, T, T).masked_fill(~causal, float("-inf"))
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + F.linear(out.transpose(1, 2).reshape(B, T, d), state[b + "attn.w_o.weight"])
        mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)).to(torch.float64)
        mlp.load_state_dict({k.removeprefix(b + "mlp."): v for k, v in state.items() if k.startswith(b + "mlp.")})
        x = x + mlp(norm(x, b + "norm2"))
    return F.linear(norm(x, "norm"), state["head.weight"])


@pytest.mark.parametrize("spec", [dict(), dict(positions="alibi"), dict(num_layers=3, d_model=8, num_heads=2, L=12)],
                         ids=repr)
def test_the_reference_is_pytorchs_layers_and_attention(spec):
    case = judged(check_gpt, spec)
    got = torch_gpt(case.x.extra["state"], case.spec, case.x.args["tokens"])
    torch.testing.assert_close(case.expected["logits"], got, rtol=1e-10, atol=1e-10)
    assert case.expected["parameters"] == sum(t.numel() for t in case.x.extra["state"].values())


@pytest.mark.parametrize("steps", [(3, 1, 2), (1, 1, 1, 1), (4, 2, 3)])
@pytest.mark.parametrize("positions", ["rope", "alibi"])
def test_the_reference_fed_chunk_by_chunk_gives_the_whole_sequences_logits(steps, positions):
    case = judged(check_cached_forward, dict(steps=steps, positions=positions))
    run, tokens, chunks, start = Run(case.x.extra["state"], case.spec), case.x.args["tokens"], [], 0
    for t in steps:
        chunks.append(run(tokens[:, start:start + t], cached=True))
        start += t
    torch.testing.assert_close(torch.cat(chunks, dim=1), case.expected["logits"], rtol=1e-10, atol=1e-10)


def test_the_contracts_names_and_shapes_are_the_solutions():
    GPT = NB.student()["GPT"]
    spec = dict(vocab=11, d_model=16, num_layers=3)
    model = GPT(spec["vocab"], spec["d_model"], 4, spec["num_layers"])
    assert {name: tuple(p.shape) for name, p in model.state_dict().items()} == gpt_shapes(**spec)
    assert sum(p.numel() for p in model.parameters()) == parameter_count(spec)


def test_the_course_toy_decoder_gives_the_same_logits_with_a_cache():
    case = judged(check_generate, dict(prompt=4, new=5))
    model = ToyDecoder(case.x.extra["state"])
    tokens = torch.randint(case.spec["vocab"], (2, 9), generator=torch.Generator().manual_seed(0))
    cache = model.new_cache()
    chunks = [model(tokens[:, :4], cache)] + [model(tokens[:, i:i + 1], cache) for i in range(4, 9)]
    torch.testing.assert_close(torch.cat(chunks, dim=1), model(tokens))


# --------------------------------------------------------------------------
# held_out_loss


def test_the_source_scores_its_entropy_rate_under_its_own_probabilities():
    """The entropy rate is what the source's own probabilities score on its held-out streams (a causal
    model can reach it and no lower), and the last symbol alone tells less."""
    P = markov_source(generator(case_seed({}, check_held_out_loss.name)))  # the case's first draw, replayed
    x = check_held_out_loss.build({})
    held = x.extra["held_out"]
    nll = -P[held[:, :-2], held[:, 1:-1]].gather(-1, held[:, 2:, None]).log().mean().item()
    rate, given_last = entropy_rates(P)
    assert abs(nll - rate) < 0.05, (nll, rate)
    assert x.extra["thresholds"]["causal"] < nll <= x.extra["thresholds"]["budget"]
    assert given_last > rate + 0.3 and given_last < math.log(SYMBOLS)


class Bigram(nn.Module):
    """A 'GPT' that reads the current symbol only: no attention, so nothing further back."""

    def __init__(self, vocab_size, d_model, num_heads, num_layers, positions="rope"):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, tokens, cache=None):
        return self.head(self.embed(tokens))


class PeeksAhead(Bigram):
    """A 'GPT' whose prediction at position t reads the symbol at t + 1: what a missing mask allows."""

    def forward(self, tokens, cache=None):
        return self.head(self.embed(tokens.roll(-1, dims=1)))


def test_a_model_that_cannot_look_back_learns_but_misses_the_context_and_the_budget():
    points, report = check_report(check_held_out_loss, Bigram, [dict()], points=4)
    assert points == 2, report
    assert "learns which symbol follows which, but no more" in report


class GlancesAhead(Bigram):
    """A 'GPT' that reads its own symbol and, faintly, the next one: it learns no faster than a
    bigram, so its loss alone would not give it away (the corpus's unmasked GPT with ALiBi did not
    learn to peek in 200 steps either)."""

    def forward(self, tokens, cache=None):
        return self.head(self.embed(tokens) + 1e-3 * self.embed(tokens.roll(-1, dims=1)))


@pytest.mark.parametrize("model", [PeeksAhead, GlancesAhead], ids=lambda m: m.__name__)
def test_a_model_that_sees_the_future_earns_nothing_and_is_told_so(model):
    points, report = check_report(check_held_out_loss, model, [dict()], points=4)
    assert points == 0, report
    assert "Your model is not causal" in report and "sees the token it predicts" in report


@pytest.mark.slow
@pytest.mark.parametrize("positions", ["rope", "alibi"])
def test_the_contracts_model_meets_the_budget_from_any_initialisation(positions):
    """A correct GPT whose layers are created in another order starts from other weights: the
    contract's model built from eight seeds stays causal and, at worst, 0.1 nats under the budget."""
    gpt = NB.student()["GPT"]
    case = {} if positions == "rope" else dict(positions=positions)  # the notebook's own cases (a case's seed is its content)
    inputs = check_held_out_loss.build(case)
    with one_thread():
        runs = [trained_held_out_loss(gpt, inputs, seed) for seed in range(8)]
    assert all(blind for _, blind in runs)
    worst, budget = max(loss for loss, _ in runs), inputs.extra["thresholds"]["budget"]
    assert worst <= budget - 0.1, f"the contract's model reaches {worst:.3f} nats at worst; the budget is {budget:.3f}"


def test_generated_tokens_of_another_dtype_lose_points_and_name_it():
    """As for 08's and 10's token ids (issue 58, item 6): the right tokens as int32, where the contract
    says int64, fail their cases, and the report names the dtype."""
    generate = NB.student()["generate"]
    cases = _visible_cases(check_generate)[:2]
    assert check_report(check_generate, generate, cases, points=2)[0] == 2
    score, text = check_report(check_generate, lambda *a, **k: generate(*a, **k).int(), cases, points=2)
    assert 0 < score < 2 and "dtype int32, expected int64" in text, text
