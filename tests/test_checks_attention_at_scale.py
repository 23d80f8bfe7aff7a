"""What is specific to 09-attention-at-scale's checks: the algorithms the known mistakes are made
from are right without a bug, the references agree with the definitions, the visible cases are
shaped so that the whole score matrix (or a whole row of tiles, or a whole-row reduction) shows,
every known mistake is told apart by a visible case, and the shapes the checks watch are those the
student's code makes. (Layout, full marks, stub and corpus: tests/test_declared_checks.py and
tests/test_grading.py.)"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attention_checks.answers import attention_at_scale as answers
from attention_checks.answers.judging import judged
from attention_checks.attention_at_scale import (
    Footprint,
    blocks,
    check_cached_decoding,
    check_flash_attention,
    check_grouped_query_attention,
    check_kv_cache,
    check_online_softmax,
    tile_budget,
)
from classroom.notebook import SourceNotebook, check_report

NB = SourceNotebook("09-attention-at-scale")
CHECKS = [check_online_softmax, check_flash_attention, check_kv_cache, check_grouped_query_attention,
          check_cached_decoding]


@pytest.mark.parametrize("shape, block_size", [((3, 10), 4), ((2, 3, 9), 1), ((4, 5), 8), ((2, 12), 3)])
def test_streamed_softmax_without_a_bug_is_the_softmax(shape, block_size):
    x = torch.randn(shape, dtype=torch.float64) * 50
    torch.testing.assert_close(answers.streamed_softmax(x, block_size), torch.softmax(x, -1), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("L, S, block_size, causal", [(20, 20, 8, False), (13, 17, 5, True), (19, 12, 6, True),
                                                      (7, 9, 1, False), (6, 5, 8, True)])
def test_tiled_attention_without_a_bug_is_pytorchs(L, S, block_size, causal):
    gen = torch.Generator().manual_seed(L * S)
    q, k = torch.randn(2, 3, L, 4, generator=gen, dtype=torch.float64), torch.randn(2, 3, S, 4, generator=gen,
                                                                                      dtype=torch.float64)
    v = torch.randn(2, 3, S, 5, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(answers.tiled_attention(q, k, v, block_size, causal),
                               F.scaled_dot_product_attention(q, k, v, is_causal=causal), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("spec", [dict(), dict(num_kv_heads=1), dict(num_heads=6, num_kv_heads=3, d_model=12)])
def test_gqa_reference_shares_consecutive_query_heads(spec):
    """enable_gqa is repeat_interleave of the key/value heads: query head h reads h // group."""
    case = judged(check_grouped_query_attention, spec)
    H, Hkv = case.spec["num_heads"], case.spec["num_kv_heads"]
    state = case.x.extra["state"]
    q, k, v = answers._projections(case.x.args["x"], state, H, Hkv)
    group = H // Hkv
    out = F.scaled_dot_product_attention(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1),
                                         is_causal=True)
    torch.testing.assert_close(case.expected["output"], answers._merge(out, state), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("steps", [(3, 1, 2), (1, 1, 1, 1), (5,), (2, 3)])
def test_decoding_chunk_by_chunk_is_the_whole_sequence_at_once(steps):
    """The cached decoding reference (one call on the whole sequence) is what the course's own
    chunk-by-chunk run with a cache computes."""
    case = judged(check_cached_decoding, dict(steps=steps))
    run = answers._decoding_run(case.x, case.spec)
    for name in ("output", "cached_keys"):
        torch.testing.assert_close(run[name], case.expected[name], rtol=1e-12, atol=1e-12)


def test_visible_flash_cases_tell_tiles_from_the_whole_matrix():
    """In every visible case of more than one block, one tile fits the budget, while the whole score
    matrix, and a row or a column of tiles, do not: that is what makes the check see them."""
    for gid, cell in NB.tests.items():
        if gid in NB.hidden() or "check_flash_attention(" not in cell.source:
            continue
        for spec in NB.cases(gid):
            x = check_flash_attention.build(spec)
            q, k, v, b = x.args.values()
            lead = math.prod(q.shape[:-2])
            L, S = q.shape[-2], k.shape[-2]
            budget = tile_budget(q, k, v, b)
            assert lead * b * b <= budget, spec
            assert lead * L * S > budget and lead * b * S > budget and lead * L * b > budget, spec


def test_visible_softmax_cases_tell_blocks_from_whole_rows():
    for gid, cell in NB.tests.items():
        if gid in NB.hidden() or "check_online_softmax(" not in cell.source:
            continue
        for spec in NB.cases(gid):
            x = check_online_softmax.build(spec)
            N, b = x.args["x"].shape[-1], x.args["block_size"]
            assert N > max(b, blocks(N, b)), spec


def test_footprint_sees_factory_calls_and_reductions():
    """The dispatch mode sees tensors made from nothing (a full mask) and the extent of a reduction."""
    with Footprint() as seen:
        mask = torch.ones(30, 40, dtype=torch.bool).triu(1)
        torch.randn(6, 7).amax(-1)
    assert seen.largest == 1200 and seen.largest_shape == (30, 40)
    assert (seen.reduced, seen.reduced_by) == (7, "amax")
    assert mask.shape == (30, 40)


def test_a_whole_causal_mask_is_not_blockwise():
    """A tiled attention with right values that makes its causal mask for the whole (L, S) matrix
    earns nothing for the causal cases, and the report names the mask."""
    solution = NB.student()["flash_attention"]

    def with_full_mask(q, k, v, block_size, causal=False):
        torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).triu(1)  # (L, S)
        return solution(q, k, v, block_size, causal)

    report = check_report(check_flash_attention, with_full_mask, [dict(causal=True, batch=(1,), E=2)])[1]
    assert "NotBlockwise" in report and "whole (L, S) score matrix (or a mask of that size)" in report, report
    assert check_report(check_flash_attention, solution, [dict(causal=True)])[1].startswith("✓")


def test_a_cache_that_is_not_used_fails_the_decoding_check():
    """A module that ignores the cache attends to each chunk alone: the decoding check fails while
    the check without a cache passes."""
    Module = NB.student()["GroupedQueryAttention"]

    class NoCache(Module):
        def forward(self, x, cache=None):
            return super().forward(x)

    assert check_report(check_grouped_query_attention, NoCache, [dict()])[1].startswith("✓")
    assert "cases fail" in check_report(check_cached_decoding, NoCache, [dict()])[1]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.name)
def test_every_known_mistake_is_told_apart_by_a_visible_case(check):
    assert NB.uncaught_mistakes(check) == set()


class SharedListsCache:
    """A KVCache whose lists are class attributes: every KVCache() shares them, so each case (and
    each test cell) sees the tensors of the earlier ones; it calls torch.cat only."""
    keys_list: list = []
    values_list: list = []

    def __len__(self):
        return sum(k.shape[-2] for k in self.keys_list)

    def update(self, k, v):
        self.keys_list.append(k)
        self.values_list.append(v)
        return torch.cat(self.keys_list, dim=-2), torch.cat(self.values_list, dim=-2)


class _Shelf:
    """Somewhere to keep tensors that the probe's look at a class's attributes and globals does not
    reach (an object's attribute)."""

    def __init__(self):
        self.keys, self.values = [], []


SHELF = _Shelf()


class ShelvedCache(SharedListsCache):
    keys_list = property(lambda self: SHELF.keys)
    values_list = property(lambda self: SHELF.values)


CACHE_CASES = [dict(), dict(batch=1, heads=4, E=2, steps=(1, 1, 1, 1))]


def test_state_kept_between_calls_is_named_and_never_a_forbidden_call():
    """Issue 59: a cache with class-attribute lists is right in its first case only; the probe sees
    the tensors its real runs left in the class and runs no meta run (one would meet them as a
    device bug that is none, and leave meta tensors there for the next test cell)."""
    SharedListsCache.keys_list, SharedListsCache.values_list = [], []
    for cases in (CACHE_CASES, CACHE_CASES[1:]):  # two test cells, one after the other
        score, text = check_report(check_kv_cache, SharedListsCache, cases, points=2)
        assert score < 2 and "on your line" in text and "holds a tensor from another cache" in text, text
        assert "grows along another axis" not in text and "On a GPU" not in text, text
        assert "private implementations" not in text and " calls " not in text.splitlines()[0], text
        if len(cases) == 2:
            assert "case 1:" not in text, text  # a fresh class's first case is right, here and on a GPU


def test_a_meta_tensor_met_in_a_real_run_is_kept_state_not_a_forbidden_call():
    """State the probe cannot see gets the meta runs' tensors: the next cell's real run meets one,
    PyTorch's meta kernels (its private Python) run, and the grader says what it observed: kept
    state, never a call of PyTorch's private implementations, nor a GPU crash."""
    SHELF.keys, SHELF.values = [], []
    check_report(check_kv_cache, ShelvedCache, CACHE_CASES[:1], points=2)  # its meta run leaves meta tensors
    score, text = check_report(check_kv_cache, ShelvedCache, CACHE_CASES[1:], points=2)
    assert score == 0 and "private implementations" not in text and " calls " not in text.splitlines()[0], text
    assert "keeps tensors from one call to the next" in text and "On a GPU" not in text, text


def _online_softmax(start_max: float, start_sum: float, reach: int = 0):
    """A streamed softmax whose running maximum and sum start at the given values, each step reading
    `reach` entries past its block for the maximum (the right one: -inf, 0 and 0)."""
    def online_softmax(x, block_size):
        m = torch.full(x.shape[:-1] + (1,), start_max, dtype=x.dtype, device=x.device)
        s = torch.full(x.shape[:-1] + (1,), start_sum, dtype=x.dtype, device=x.device)
        for i in range(0, x.shape[-1], block_size):
            new = torch.maximum(m, x[..., i:i + block_size + reach].amax(-1, keepdim=True))
            s = s * torch.exp(m - new) + torch.exp(x[..., i:i + block_size] - new).sum(-1, keepdim=True)
            m = new
        return torch.exp(x - m) / s
    return online_softmax


def test_a_sum_that_starts_at_one_is_not_float32_precision():
    """Issue 59: in float64 throughout, an error of a few 1e-3 is within float32's tolerance but far
    from float32's rounding: no "float32 precision" (it is said where the code computes in float32)."""
    cases = [dict(dtype="float64"), dict(shape=(2, 3, 25), block_size=4, dtype="float64", std=3.0)]
    score, text = check_report(check_online_softmax, _online_softmax(-3.0, 1.0), cases, points=2)
    assert score < 2 and "max abs error 0.00" in text and "float32 precision" not in text, text
    right = _online_softmax(float("-inf"), 0.0)
    score, text = check_report(check_online_softmax, lambda x, b: right(x.float(), b).to(x.dtype), cases, points=2)
    assert "float32 precision only" in text, text


def test_a_block_read_one_entry_too_far_is_not_a_whole_row():
    """The check observed a reduction of block_size + 1 numbers: said as such, not "a whole row"."""
    score, text = check_report(check_online_softmax, _online_softmax(float("-inf"), 0.0, reach=1), [dict()], points=2)
    assert score == 0 and "reduces 5 numbers at once: more than one block (4), less than a whole row (10)" in text
    assert "whole row at once" not in text, text


def test_a_cat_along_the_positions_tells_the_checks_from_the_students():
    """"except in dimension 2" is the student's own cat along the positions (a tensor of another
    case met there) or the check's cat of what the updates returned (the cache grew along another
    axis): the hint says which, by the line that raised."""
    class GrowsAlongFeatures:
        def __init__(self):
            self.keys = self.values = None

        def __len__(self):
            return 0 if self.keys is None else self.keys.shape[2]

        def update(self, k, v):
            self.keys = k if self.keys is None else torch.cat([self.keys, k], dim=-1)
            self.values = v if self.values is None else torch.cat([self.values, v], dim=-1)
            return self.keys, self.values

    _, text = check_report(check_kv_cache, GrowsAlongFeatures, CACHE_CASES[1:], points=2)
    assert "in the check's join of what your updates return" in text and "another cache" not in text, text
