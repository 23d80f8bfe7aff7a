"""tests/once.py: a preparation claimed by one test process, its outcome read by the others."""
from __future__ import annotations

import multiprocessing
import subprocess

import pytest
from once import Once


def _claim_in_another_process(folder, name, queue) -> None:
    queue.put(Once(folder, name).claim())


def test_only_the_first_process_claims_it(tmp_path):
    queue = multiprocessing.get_context("spawn").Queue()
    others = [multiprocessing.get_context("spawn").Process(target=_claim_in_another_process,
                                                            args=(tmp_path, "book", queue)) for _ in range(3)]
    mine = Once(tmp_path, "book").claim()
    for process in others:
        process.start()
    for process in others:
        process.join(60)
    assert mine and [queue.get(timeout=5) for _ in others] == [False] * 3


def test_a_published_value_is_read_by_another_claimant(tmp_path):
    maker, reader = Once(tmp_path, "published"), Once(tmp_path, "published")
    assert maker.claim() and not reader.claim()
    assert not reader.done()
    maker.publish((tmp_path / "dist", subprocess.CompletedProcess(["publish"], 0, "made", "")))
    dist, run = reader.value()
    assert dist == tmp_path / "dist" and run.stdout == "made"


def test_a_failed_preparation_fails_whoever_waits_for_it(tmp_path):
    maker = Once(tmp_path, "site")
    assert maker.claim()
    maker.fail("jupyter-book build failed: chapter 03")
    with pytest.raises(pytest.fail.Exception, match="chapter 03"):
        Once(tmp_path, "site").value()


def test_nobody_waits_for_what_no_process_claimed(tmp_path):
    unclaimed = Once(tmp_path, "published_site")
    unclaimed.wait()  # returns at once
    with pytest.raises(AssertionError, match="never claimed"):
        unclaimed.value()
