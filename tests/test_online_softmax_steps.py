"""Chapter 09's online-softmax stepper draws numbers that coursebuild/online_softmax_steps.py
computed: the committed book/online_softmax_frames.py is what that module writes now, and its
states are the online softmax's, held against torch.softmax and the attention output in float64.
"""
from __future__ import annotations

import importlib.util
import math

import torch

from classroom import REPO
from coursebuild import online_softmax_steps as steps_module


def committed_frames():
    spec = importlib.util.spec_from_file_location("online_softmax_frames", REPO / "book" / "online_softmax_frames.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_frames_are_what_the_module_writes():
    # Regenerate with: python -m coursebuild.online_softmax_steps
    assert (REPO / "book" / "online_softmax_frames.py").read_text() == steps_module.source()
    assert steps_module.main(["--check"]) == 0


def test_the_last_state_is_the_softmax_and_the_attention_output():
    frames = committed_frames()
    scores = torch.tensor(frames.SCORES, dtype=torch.float64)
    values = torch.tensor(frames.VALUES, dtype=torch.float64)
    last = frames.STEPS[-1]
    assert torch.allclose(torch.tensor(last["weights"], dtype=torch.float64), torch.softmax(scores, -1), atol=1e-12)
    output = torch.tensor(last["acc"], dtype=torch.float64) / last["l"]
    assert torch.allclose(output, torch.softmax(scores, -1) @ values, atol=1e-12)


def test_every_state_is_the_softmax_of_what_has_been_read():
    frames = committed_frames()
    assert frames.STEPS[0]["m"] is None and frames.STEPS[0]["l"] == 0
    read = 0
    for step in frames.STEPS[1:]:
        assert step["start"] == read and step["stop"] - step["start"] <= frames.BLOCK_SIZE
        read = step["stop"]
        seen = torch.tensor(frames.SCORES[:read], dtype=torch.float64)
        assert step["m"] == seen.max().item()
        assert math.isclose(step["l"], torch.exp(seen - seen.max()).sum().item(), rel_tol=1e-12)
        before = -math.inf if step["m_before"] is None else step["m_before"]
        assert math.isclose(step["rescale"], math.exp(before - step["m"]), rel_tol=1e-12)
        weights = torch.tensor(step["weights"], dtype=torch.float64)
        assert torch.allclose(weights[:read], torch.softmax(seen, -1), atol=1e-12)
        assert not weights[read:].any()
    assert read == len(frames.SCORES)
    moves = [s for s in frames.STEPS[2:] if s["rescale"] < 1]
    assert moves, "the example row never moves its maximum after the first block: nothing to rescale"


def test_a_stale_file_is_reported(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(steps_module, "FRAMES", tmp_path / "online_softmax_frames.py")
    assert steps_module.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().out
    assert steps_module.main([]) == 0 and steps_module.main(["--check"]) == 0
