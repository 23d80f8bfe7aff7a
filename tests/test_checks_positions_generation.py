"""What is specific to 10-positions-and-generation's checks: the references agree with other
derivations of the same thing (RoPE as complex multiplication, ALiBi's slopes as the paper lists
them, nucleus filtering as HF-style code writes it, beam search against exhaustive search), the
cases sit far from a top-p boundary, and diagnoses the corpus does not cover name their mistakes.
(Layout, full marks, stub and corpus: tests/test_declared_checks.py and tests/test_grading.py.)"""
from __future__ import annotations

import itertools
import math

import pytest
import torch

from attention_checks.answers.judging import judge, judge_records, judged
from attention_checks.answers.positions_generation import (
    DISTRIBUTION_BUGS,
    IN_THE_DISTRIBUTION,
    beam,
    distribution,
    keep_top_p,
    rope,
)
from attention_checks.positions_generation import (
    DRIFT,
    ToyLM,
    check_alibi_bias,
    check_apply_rope,
    check_beam_search,
    check_next_token_distribution,
    check_sample_next,
)
from attention_checks.probe import probe_all
from attention_checks.record import _encode_outcome
from classroom.notebook import SourceNotebook, check_report

NB = SourceNotebook("10-positions-and-generation")
CPU = torch.device("cpu")
CHECKS = {c.name: c for c in (check_apply_rope, check_alibi_bias, check_next_token_distribution, check_sample_next,
                              check_beam_search)}


def _cases(name: str) -> list[dict]:
    """Every case of the notebook's test cells (visible and hidden) for one check."""
    function = CHECKS[name].function_name
    return [spec for gid, cell in NB.tests.items() if f"{function}(" in cell.source for spec in NB.cases(gid)]


@pytest.mark.parametrize("check", CHECKS.values(), ids=lambda c: c.name)
def test_every_known_mistake_is_told_apart_by_a_visible_case(check):
    assert NB.uncaught_mistakes(check) == set()


# --------------------------------------------------------------------------
# apply_rope


@pytest.mark.parametrize("spec", _cases("apply_rope"))
def test_rope_reference_is_a_complex_rotation(spec):
    """Pair (x1, x2) as the complex number x1 + i x2, multiplied by exp(i p theta_i)."""
    case = judged(check_apply_rope, spec)
    x, positions = case.x.args["x"], case.x.args["positions"]
    base = case.x.kwargs.get("base", 10000.0)
    half = x.shape[-1] // 2
    theta = torch.tensor([base ** (-2 * i / x.shape[-1]) for i in range(half)], dtype=torch.float64)
    z = torch.complex(x[..., :half], x[..., half:]) * torch.polar(torch.ones(len(positions), half, dtype=torch.float64),
                                                                  positions.double()[:, None] * theta)
    torch.testing.assert_close(case.expected["output"], torch.cat([z.real, z.imag], -1), rtol=1e-12, atol=1e-12)
    # a rotation keeps every row's length
    torch.testing.assert_close(case.expected["output"].norm(dim=-1), x.norm(dim=-1), rtol=1e-12, atol=1e-12)


def test_rope_scores_depend_on_the_offset_only():
    """q_m . k_n after RoPE equals the score of positions (m + s, n + s) for any s, and the
    interleaved convention is the halves one with the features permuted."""
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 10, 8, generator=gen, dtype=torch.float64), torch.randn(2, 10, 8, generator=gen,
                                                                                   dtype=torch.float64)
    positions = torch.randperm(30, generator=gen)[:10]
    here = rope(q, positions) @ rope(k, positions).transpose(-2, -1)
    for shift in (1, 5, 100):
        moved = rope(q, positions + shift) @ rope(k, positions + shift).transpose(-2, -1)
        torch.testing.assert_close(moved, here, rtol=1e-10, atol=1e-10)
    halves_order = torch.tensor([0, 2, 4, 6, 1, 3, 5, 7])  # interleaved feature order -> halves
    torch.testing.assert_close(rope(q, positions, pairs="interleaved")[..., halves_order],
                               rope(q[..., halves_order], positions))


def test_a_shift_invariant_bug_loses_the_output_but_not_the_drift():
    """positions + 1 is still a rotation: the output is wrong, the score drift right (so the
    report says which part of the contract is broken)."""
    apply_rope = NB.student()["apply_rope"]
    score, text = check_report(CHECKS["apply_rope"], lambda x, p, base=10000.0: apply_rope(x, p + 1, base), [dict(dtype="float64")])
    assert 0 < score < 1 and "output" in text and "values differ" in text
    assert f"{DRIFT} : shape" in text and f"{DRIFT} : shape (2, 6, 6) ok; values ok" in text, text
    assert "position 0 is not rotated" in text


def test_adding_a_position_vector_is_not_relative():
    """Chapter 06's way (x + PE) is no rotation: the drift is not 0."""
    def added(x, positions, base=10000.0):
        D = x.shape[-1]
        angle = positions.to(x.dtype)[:, None] * base ** (-torch.arange(0, D, 2, dtype=x.dtype, device=x.device) / D)
        return x + torch.cat([angle.sin(), angle.cos()], -1)
    score, text = check_report(CHECKS["apply_rope"], added, [dict()])
    assert score == 0.25 and f"{DRIFT} : shape (2, 6, 6) ok; values differ" in text, text  # structure only


# --------------------------------------------------------------------------
# alibi_bias


def test_alibi_slopes_are_the_papers():
    bias = judged(check_alibi_bias, dict(num_heads=8, L=2, S=2)).expected["bias"]  # (8, 2, 2)
    torch.testing.assert_close(-bias[:, 1, 0], torch.tensor([1 / 2 ** k for k in range(1, 9)], dtype=torch.float64))
    # the causal row of the paper's figure: m * [-(i), ..., -1, 0] for query i
    bias = judged(check_alibi_bias, dict(num_heads=4, L=5)).expected["bias"]
    m = 2 ** -2
    torch.testing.assert_close(bias[0, 4], m * torch.tensor([-4.0, -3, -2, -1, 0], dtype=torch.float64))
    # queries that are the last L of S positions: the rows of the L = S bias
    full = judged(check_alibi_bias, dict(num_heads=2, L=7)).expected["bias"]
    torch.testing.assert_close(judged(check_alibi_bias, dict(num_heads=2, L=3, S=7)).expected["bias"], full[:, 4:])


def test_alibi_rejects_cases_outside_the_contract():
    with pytest.raises(ValueError, match="power of two"):
        check_alibi_bias(lambda *a: None, points=1, cases=[dict(num_heads=6)], device=CPU)
    with pytest.raises(ValueError, match="S >= L"):
        check_alibi_bias(lambda *a: None, points=1, cases=[dict(L=5, S=3)], device=CPU)


# --------------------------------------------------------------------------
# next_token_distribution and sample_next


def _nucleus_as_hf_writes_it(probs: torch.Tensor, p: float) -> torch.Tensor:
    """Transformers' TopPLogitsWarper on probabilities: sort ascending, drop the tokens whose
    cumulative probability is <= 1 - p, keep the most probable one."""
    ordered, order = probs.sort(dim=-1)
    drop = ordered.cumsum(-1) <= 1 - p
    drop[..., -1] = False
    kept = probs.masked_fill(drop.scatter(-1, order, drop), 0)
    return kept / kept.sum(-1, keepdim=True)


@pytest.mark.parametrize("name", ["next_token_distribution", "sample_next"])
def test_distribution_cases_are_far_from_a_top_p_boundary(name):
    """A float32 student must not fall on the other side of top_p than the float64 reference:
    in every case no cumulative probability is within 1e-4 of top_p."""
    for spec in _cases(name):
        case = judged(CHECKS[name], spec)
        filters = {k: case.x.kwargs[k] for k in ("temperature", "top_k", "top_p")}
        if filters["top_p"] is None:
            continue
        before = distribution(case.x.args["logits"], filters["temperature"], filters["top_k"])
        through = before.sort(-1, descending=True).values.cumsum(-1)
        assert (through - filters["top_p"]).abs().min() > 1e-4, spec


@pytest.mark.parametrize("spec", _cases("next_token_distribution"))
def test_distribution_reference(spec):
    case = judged(check_next_token_distribution, spec)
    probs, logits = case.expected["probs"], case.x.args["logits"]
    T, k, p = (case.x.kwargs[key] for key in ("temperature", "top_k", "top_p"))
    torch.testing.assert_close(probs.sum(-1), torch.ones(probs.shape[0], dtype=torch.float64))
    expected = torch.softmax(logits / T, -1)
    if k is not None:
        expected = expected.masked_fill(expected < expected.topk(min(k, expected.shape[-1]), -1).values[..., -1:], 0)
        expected = expected / expected.sum(-1, keepdim=True)
        assert ((probs > 0).sum(-1) <= k).all()
    if p is not None:
        expected = _nucleus_as_hf_writes_it(expected, p)
    torch.testing.assert_close(probs, expected, rtol=1e-12, atol=1e-12)
    if k is None and p is None:  # nothing filtered: the order of the logits is kept
        assert (probs > 0).all()


def test_top_p_keeps_the_token_that_crosses_p():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]], dtype=torch.float64)
    assert (keep_top_p(probs, 0.7) > 0).tolist() == [[True, True, False, False]]  # 0.5 < 0.7, then 0.8
    assert (keep_top_p(probs, 0.5) > 0).tolist() == [[True, False, False, False]]  # 0.5 reaches 0.5
    assert (keep_top_p(probs, 0.1) > 0).tolist() == [[True, False, False, False]]  # the first is always kept


def test_sampled_tokens_follow_the_distribution_and_not_the_dtype():
    spec = dict(top_k=4, temperature=0.7, B=1, draws=20000, seed=5)
    case = judged(check_sample_next, spec)
    tokens = case.expected["tokens"]
    probs = distribution(case.x.args["logits"][:1], 0.7, 4)[0]
    frequencies = torch.bincount(tokens, minlength=probs.numel()).double() / tokens.numel()
    assert (frequencies[probs == 0] == 0).all()
    torch.testing.assert_close(frequencies, probs, rtol=0, atol=0.015)
    # the same draws from float32 probabilities: a float32 student gets the reference's tokens
    float32 = torch.multinomial(probs.float().expand(20000, -1), 1, generator=torch.Generator().manual_seed(
        case.x.extra["draw_seed"])).squeeze(-1)
    assert torch.equal(float32, tokens)


@pytest.mark.parametrize("spec", _cases("sample_next"))
def test_the_generator_decides_every_sample_case(spec):
    """Draws from the right distribution by any other random source match a case's tokens with a
    chance below 1e-9 (the product over its rows of the chance that two draws agree)."""
    case = judged(check_sample_next, spec)
    probs = distribution(case.x.args["logits"], case.x.kwargs["temperature"], case.x.kwargs["top_k"],
                         case.x.kwargs["top_p"])
    assert (probs ** 2).sum(-1).log10().sum() < -9


def test_tokens_not_drawn_with_the_generator_earn_nothing():
    def own_random_source(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
        probs = distribution(logits, temperature, top_k, top_p)
        return torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(123)).squeeze(-1)

    score, text = check_report(CHECKS["sample_next"], own_random_source, _cases("sample_next"), points=2)
    assert score == 0 and "pass the generator you are given" in text, text


def test_a_distribution_with_no_token_left_gets_its_hint():
    def none_kept(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
        probs = distribution(logits, temperature, top_k, top_p, bug="top-p one too few, none kept")
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    score, text = check_report(CHECKS["sample_next"], none_kept, [dict(top_p=0.3, std=3.0, seed=1)])
    assert score == 0 and "raised RuntimeError" in text and "always keeps the most probable token" in text, text


# --------------------------------------------------------------------------
# beam_search


def _exhaustive(step_fn, start: int, max_len: int, eos: int, V: int) -> tuple[list[int], float]:
    """Every sequence that ends with eos (at most max_len tokens) or runs max_len tokens without
    it, scored by its mean log-probability: the best."""
    best, best_score = None, -math.inf
    for length in range(1, max_len + 1):
        for tail in itertools.product(range(V), repeat=length):
            if eos in tail[:-1] or (length < max_len and tail[-1] != eos):
                continue
            seq = [start, *tail]
            total = sum(step_fn(torch.tensor([seq[:t]]))[0, seq[t]].item() for t in range(1, len(seq)))
            if total / length > best_score:
                best, best_score = tail, total / length
    return list(best), best_score


@pytest.mark.parametrize("seed", range(4))
def test_a_beam_wide_enough_is_exhaustive_search(seed):
    case = judged(check_beam_search, dict(V=3, max_len=4, seed=seed))
    model = ToyLM(case.x.extra["state"])
    tokens, score = beam(model, 1, 3 ** 4, 4, 0)
    best, best_score = _exhaustive(model, 1, 4, 0, 3)
    assert tokens.tolist() == best and math.isclose(score, best_score, rel_tol=1e-12)


def test_the_visible_cases_have_a_beam_that_beats_greedy():
    """Beam search earns its keep: in a visible case, greedy decoding's sequence has a lower
    length-normalised score than the beam's."""
    better = []
    for spec in NB.cases("test_beam_search"):
        case = judged(check_beam_search, spec)
        model, (start, _, max_len, eos) = ToyLM(case.x.extra["state"]), list(case.x.args.values())[1:]
        better.append(case.expected["score"] > beam(model, start, 1, max_len, eos)[1] + 1e-9)
    assert any(better), better


def test_malformed_beam_results():
    fn = NB.student()["beam_search"]
    score, text = check_report(CHECKS["beam_search"], lambda *a: fn(*a)[0], [dict()])
    assert score == 0 and "it must return a tuple (tokens, score)" in text
    score, _ = check_report(CHECKS["beam_search"], lambda *a: (fn(*a)[0].tolist(), torch.tensor(fn(*a)[1])), [dict()])
    assert score == 1  # a list of tokens and a 0-dim tensor score are read as the contract's types


# --------------------------------------------------------------------------
# records


@pytest.mark.parametrize("name", CHECKS)
def test_outcomes_survive_the_recorder(name):
    check, fn, cases = CHECKS[name], NB.student()[name], _cases(name)
    probed = probe_all(check, fn, cases, CPU)
    record = {"check": check.name, "forbidden": [],
              "outcomes": [_encode_outcome(o, like) for o, like in zip(probed.outcomes, probed.likes)]}
    here = judge(check, cases, probed.outcomes, points=1, devices=["cpu"] * len(cases))
    there = judge_records(check, record, cases, points=1)
    assert here.score == there.score == 1, there.text


# --------------------------------------------------------------------------
# every diagnosis is checked across the failing cases before it is shown (issue 59): planted
# mistakes that have a diagnosis's symptom in some case but not its cause


def _rope_with(theta_of):
    """A RoPE of the contract's pairing whose frequencies are theta_of(half, D) (float64)."""
    def apply_rope(x, positions, base=10000.0):
        half = x.shape[-1] // 2
        angle = positions.to(torch.float64)[:, None] * theta_of(half, x.shape[-1], base).to(x.device)  # (L, D/2)
        cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    return apply_rope


def test_a_frequency_index_from_one_is_not_said_to_ignore_the_positions():
    """Where L = 1 "positions ignored" happens to give its output, but where the positions are
    0..L-1 that mistake is the reference and the case still fails: the claim is withdrawn."""
    from_one = _rope_with(lambda half, D, base: base ** (-2 * torch.arange(1, half + 1, dtype=torch.float64) / D))
    score, text = check_report(check_apply_rope, from_one, _cases("apply_rope"), points=3)
    assert 0 < score < 3 and "whatever the positions" not in text and "hint:" not in text, text
    # the catalogue's own mistake keeps its hint
    ignored = _rope_with(lambda half, D, base: base ** (-2 * torch.arange(half, dtype=torch.float64) / D))
    score, text = check_report(check_apply_rope, lambda x, positions, base=10000.0: ignored(
        x, torch.arange(x.shape[-2], device=x.device), base), _cases("apply_rope"), points=3)
    assert "You rotate by 0, 1, ..., L-1 whatever the positions" in text, text


def test_inverse_frequencies_are_not_said_to_swap_the_drifts_axes():
    """A drift that should be 0 is its own transpose: float64 noise around it is no swap."""
    inverse = _rope_with(lambda half, D, base: base ** (2 * torch.arange(half, dtype=torch.float64) / D))
    score, text = check_report(check_apply_rope, inverse, _cases("apply_rope"), points=3)
    assert score < 3 and "axes swapped" not in text, text


def test_alibi_slopes_of_another_base_get_no_constant_factor():
    """One head's bias is a multiple of the reference; the other cases' are not, and where the
    slopes of another base equal those of "eight heads" (H = 4), H = 8 refutes that mistake."""
    def alibi_base_16(num_heads, L, S):
        m = 2 ** (-4 * torch.arange(1, num_heads + 1, dtype=torch.float64) / num_heads)
        distance = torch.arange(L, dtype=torch.float64)[:, None] + S - L - torch.arange(S, dtype=torch.float64)
        return (-m[:, None, None] * distance).float()

    score, text = check_report(check_alibi_bias, alibi_base_16, _cases("alibi_bias"), points=3)
    assert score < 3 and "constant factor" not in text and "do not depend on the number of heads" not in text, text
    assert "bias first differs at index (0, 0, 1)" in text, text
    # one factor for every case: said
    reference = NB.student()["alibi_bias"]
    score, text = check_report(check_alibi_bias, lambda *a: 2 * reference(*a), _cases("alibi_bias"), points=3)
    assert "bias is the reference times 2 everywhere: a constant factor" in text, text


def test_a_top_k_from_the_wrong_end_is_not_the_filters_order():
    """With top-p after it, a top-k threshold taken from the least probable end gives the draws
    of "top-p first"; where top-k alone applies, "top-p first" is the reference and the case
    still fails: the claim is withdrawn, in sample_next's tests and in next_token_distribution's."""
    def distribution_wrong_end(logits, temperature=1.0, top_k=None, top_p=None):
        probs = (logits / temperature).softmax(-1)
        if top_k is not None:
            kth = probs.topk(min(top_k, probs.shape[-1]), -1, largest=False).values[..., -1:]
            probs = probs * (probs >= kth)
            probs = probs / probs.sum(-1, keepdim=True)
        if top_p is not None:
            ordered, order = probs.sort(-1, descending=True)
            kept = torch.zeros_like(probs).scatter(-1, order, ordered * (ordered.cumsum(-1) - ordered < top_p))
            probs = kept / kept.sum(-1, keepdim=True)
        return probs

    def sample_wrong_end(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
        probs = distribution_wrong_end(logits, temperature, top_k, top_p)
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)

    for check, fn in ((check_sample_next, sample_wrong_end), (check_next_token_distribution, distribution_wrong_end)):
        score, text = check_report(check, fn, _cases(check.name), points=2)
        assert score < 2 and "contract's order" not in text, text


@pytest.mark.parametrize("bug", [b for b in DISTRIBUTION_BUGS if b not in ("not renormalised",
                                                                          "top-p one too few, none kept")])
def test_a_distributions_mistake_is_named_in_its_own_tests_and_located_in_sample_nexts(bug):
    """Issue 59, item 5: next_token_distribution's mistake is named in its own tests; sample_next's
    tests, whose tokens it decides, name it as a mistake of the distribution they are drawn from."""
    def next_token_distribution(logits, temperature=1.0, top_k=None, top_p=None):
        return distribution(logits.double(), temperature, top_k, top_p, bug=bug).to(logits.dtype)

    def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
        probs = next_token_distribution(logits, temperature, top_k, top_p)
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)

    hint = DISTRIBUTION_BUGS[bug]
    _, own = check_report(check_next_token_distribution, next_token_distribution, _cases("next_token_distribution"))
    assert hint in own, own
    _, drawn = check_report(check_sample_next, sample_next, _cases("sample_next"))
    assert IN_THE_DISTRIBUTION + hint in drawn or IN_THE_DISTRIBUTION in drawn and hint in drawn, drawn
