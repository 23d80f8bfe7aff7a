"""The functional publish scan (autograder.instructor.functional, issue 48): a working
implementation of a graded function under another name, wherever students would get it (a book
module, a page's code cell, a module of the wheel), earns that name's points on the hidden cases
and is reported with its file, its name and the points; code that earns nothing is not."""
from __future__ import annotations

import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from autograder.instructor.functional import LEAK_SHARE, definitions, functional_scan, sandbox_problem

pytestmark = pytest.mark.slow  # a child process in bubblewrap that runs the hidden cases

MODULE = '''\
import torch


def upper_triangle(size, device=None):
    """causal_mask under another name."""
    i = torch.arange(size, device=device)
    return i[None, :] > i[:, None]


def unrelated(a, b):
    return a + b
'''

PAGE = '''\
# A chapter

```{code-cell} ipython3
---
tags: [hide-input]
---
import torch

def tokens_equal_to(tokens, pad_id=0):  # padding_mask under another name, in a cell with options
    return tokens == pad_id
```

```{code-cell} ipython3
:tags: [hide-output]

tokens_equal_to(torch.tensor([[1, 0]]))  # an experiment: never run by the scan
raise SystemExit("a page's experiment ran")
```
'''

WHEEL_MODULE = '''\
def scores_of(k, q):
    """scaled_scores with its arguments the other way round."""
    return q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
'''


def _venv_under_tmp(tmp: Path) -> Path:
    """This virtual environment as one that lives under /tmp (its configuration, its interpreter and
    its packages, by links), where the scan's sandbox has a /tmp of its own: its interpreter."""
    root = tmp / "venv"
    (root / "bin").mkdir(parents=True)
    shutil.copy2(Path(sys.prefix) / "pyvenv.cfg", root / "pyvenv.cfg")
    (root / "bin" / "python").symlink_to(Path(sys.executable).resolve())
    (root / "lib").symlink_to(Path(sys.prefix) / "lib")
    return root / "bin" / "python"


def test_working_implementations_under_other_names_fail_and_others_do_not(tmp_path):
    """With an interpreter that lives under /tmp, which the sandbox's own /tmp used to hide (issue
    61): a virtual environment there, made of the suite's own (`make` runs the suite in one)."""
    with tempfile.TemporaryDirectory(prefix="venv-under-tmp-", dir="/tmp") as tmp:
        python = str(_venv_under_tmp(Path(tmp))) if sys.prefix != sys.base_prefix else sys.executable
        assert sandbox_problem(python) is None  # publish's check before it builds anything
        _planted_implementations_are_found(tmp_path, python)


def _planted_implementations_are_found(tmp_path: Path, python: str) -> None:
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "helpers.py").write_text(MODULE)
    (tmp_path / "book" / "chapter.md").write_text(PAGE)
    (tmp_path / "dist").mkdir()
    with zipfile.ZipFile(tmp_path / "dist" / "checks-0-py3-none-any.whl", "w") as wheel:
        wheel.writestr("planted/__init__.py", "")
        wheel.writestr("planted/scores.py", WHEEL_MODULE)
    report = functional_scan(tmp_path, python=python)
    print(report.summary())  # the figures, for the record (pytest -s)
    found = {(e.file, e.function, e.graded): e for e in report.earned}
    assert set(found) == {("book/helpers.py", "upper_triangle", "causal_mask"),
                          ("book/chapter.md", "tokens_equal_to", "padding_mask"),
                          ("dist/checks-0-py3-none-any.whl!planted/scores.py", "scores_of", "scaled_scores")}, \
        [e.line() for e in report.earned]
    for earned in found.values():
        assert earned.points > LEAK_SHARE * earned.of and earned.of > 0
    assert "in the order (1, 0)" in found["dist/checks-0-py3-none-any.whl!planted/scores.py", "scores_of",
                                          "scaled_scores"].adapter
    assert "book/helpers.py: upper_triangle earns" in found["book/helpers.py", "upper_triangle", "causal_mask"].line()
    assert report.candidates == 4 and report.problems == []


# Pieces a chapter could publish, each of which a student's adapter turns into a graded name
# (issue 58), beside honest twins of the same shapes that compute something else.
PIECES = '''\
import math

import torch


def one_head_tiles(q, k, v, block_size):
    """Tiled attention of one head (L, E), no mask: flash_attention once per head and query row."""
    out = torch.empty(len(q), v.shape[1], dtype=q.dtype)
    for start in range(0, len(q), block_size):
        rows = slice(start, start + block_size)
        q_block = q[rows] / math.sqrt(q.shape[1])
        m = torch.full((len(q_block), 1), float("-inf"), dtype=q.dtype)
        l = torch.zeros(len(q_block), 1, dtype=q.dtype)
        acc = torch.zeros(len(q_block), v.shape[1], dtype=q.dtype)
        for k_start in range(0, len(k), block_size):
            cols = slice(k_start, k_start + block_size)
            scores = q_block @ k[cols].T
            m_new = torch.maximum(m, scores.max(dim=1, keepdim=True).values)
            p = torch.exp(scores - m_new)
            rescale = torch.exp(m - m_new)
            l, acc, m = l * rescale + p.sum(dim=1, keepdim=True), acc * rescale + p @ v[cols], m_new
        out[rows] = acc / l
    return out


def unchanged(x, *rest):
    """Its input back, as many helpers do: not a leak, whatever points the cases give a do-nothing
    answer (apply_rope's identity at position 0)."""
    return x


def one_head_mean(q, k, v, block_size):
    """The honest twin: one head's mean of the values, the same shapes, not attention."""
    return v.mean(dim=0, keepdim=True).expand(len(q), -1).clone()


def running_max_and_sum(x, block_size):
    """A row's maximum m and sum l of exp(x - m), block by block: online_softmax once per row."""
    m, l = torch.tensor(float("-inf"), dtype=x.dtype), torch.tensor(0.0, dtype=x.dtype)
    for start in range(0, len(x), block_size):
        block = x[start:start + block_size]
        m_new = torch.maximum(m, block.max())
        l, m = l * torch.exp(m - m_new) + torch.exp(block - m_new).sum(), m_new
    return m, l


def running_max_and_no_sum(x, block_size):
    """The honest twin: a row's maximum and a sum never accumulated (a bug), the same shapes."""
    return x.max(), torch.zeros((), dtype=x.dtype)


class GrowingCache:
    """A cache of keys and values along a dimension the caller names: KVCache with dim=-2."""

    def __init__(self, dim):
        self.dim, self.k, self.v = dim, None, None

    def __len__(self):
        return 0 if self.k is None else self.k.shape[self.dim]

    def update(self, k, v):
        self.k = k if self.k is None else torch.cat([self.k, k], dim=self.dim)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=self.dim)
        return self.k, self.v


class SwappingCache(GrowingCache):
    """The honest twin: it returns the values as the keys and counts updates, not positions."""

    def __init__(self, dim):
        super().__init__(dim)
        self.updates = 0

    def __len__(self):
        return self.updates

    def update(self, k, v):
        self.updates += 1
        keys, values = super().update(k, v)
        return values, keys


class AnnouncedCache:
    """The honest twin of a given class (the course's GivenKVCache): a static cache made for the
    updates it will get, which refuses any other; a default for its argument makes no KVCache."""

    def __init__(self, chunks):
        self.chunks, self.k, self.v = list(chunks), None, None

    def __len__(self):
        return 0 if self.k is None else self.k.shape[-2]

    def update(self, k, v):
        if not self.chunks or k.shape[-2] != self.chunks.pop(0):
            raise ValueError("an update nobody announced")
        self.k = k if self.k is None else torch.cat([self.k, k], dim=-2)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=-2)
        return self.k, self.v


def merged_at_rank(kpm, attn, dims):
    """The honest twin of a checks' helper (masks.merged_block): the padding and attention masks
    merged as scores of `dims` dimensions see them; it knows no number of heads."""
    pad = None if kpm is None else kpm.view(kpm.shape[0], *[1] * (dims - 2), kpm.shape[1])
    block = attn if pad is None else pad if attn is None else pad | attn
    if block.dim() > dims:
        raise ValueError("a mask of more dimensions than the scores")
    return block.view(*[1] * (dims - block.dim()), *block.shape)


class Withheld:
    """The honest twin of a book's decoding loop, as publish withholds it: its body raises."""

    def generate(self, src, start_token, steps):
        raise NotImplementedError("Withheld.generate is the model solution of 08-decoder")


class Translator:
    """A book's model whose greedy decoding loop a four-line wrapper gives the check's model."""

    def generate(self, src, start_token, steps):
        memory, src_pad = self.encode(src)
        out = torch.full_like(src[:, :1], start_token)
        for _ in range(steps):
            logits = self.decode(out, memory, src_pad)
            out = torch.cat([out, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        return out[:, 1:]

    def first_choice(self, src, start_token, steps):
        """The honest twin: the step-one choice repeated, never fed back."""
        memory, src_pad = self.encode(src)
        first = self.decode(torch.full_like(src[:, :1], start_token), memory, src_pad)[:, -1].argmax(-1)
        return first[:, None].expand(-1, steps).clone()
'''


def test_pieces_behind_a_students_adapters_fail_and_their_honest_twins_do_not(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "pieces.py").write_text(PIECES)
    report = functional_scan(tmp_path)
    print(report.summary())
    found = {(e.function, e.graded): e for e in report.earned}
    assert set(found) == {("one_head_tiles", "flash_attention"), ("running_max_and_sum", "online_softmax"),
                          ("GrowingCache", "KVCache"), ("Translator.generate", "greedy_decode")}, \
        [e.line() for e in report.earned]
    tiles = found["one_head_tiles", "flash_attention"]
    assert tiles.points == tiles.of and "query row over keys 0..i" in tiles.adapter  # causal cases too
    assert found["running_max_and_sum", "online_softmax"].points == found["running_max_and_sum", "online_softmax"].of
    assert "exp(x - m) / l" in found["running_max_and_sum", "online_softmax"].adapter
    assert found["GrowingCache", "KVCache"].adapter.startswith("with the default arguments {'dim': ")
    assert "encode and decode" in found["Translator.generate", "greedy_decode"].adapter
    assert report.problems == []


def test_only_imports_and_definitions_run():
    tree = definitions("import torch\nx = torch.ones(3)\nf = lambda t: t\ndef g():\n    return 1\nprint(x)\n%time g()\n")
    assert [type(node).__name__ for node in tree.body] == ["Import", "Assign", "FunctionDef"]


def test_the_dry_run_names_an_interpreter_that_cannot_run(tmp_path):
    problem = sandbox_problem(str(tmp_path / "no-python"))
    assert problem is not None and "no-python" in problem
