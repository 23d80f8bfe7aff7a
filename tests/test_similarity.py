"""``python -m autograder similarity``: planted copies rank above every honest pair.

The class: honest students of 03-qkv who wrote their own solutions (corpus students and the
reference), one who submitted the starter code only, and two planted copies: one of a student
whose attention is built from helper functions (the helpers reordered, every name changed,
comments added), one of the einsum student (variables renamed, a comment added). The honest
students share the released starter code (signatures, docstrings) and nothing else.
"""
from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.instructor.similarity import own_code, similarity
from classroom import load_corpus, make_submission, reference_code

pytestmark = pytest.mark.slow  # runs kernels, the CLI, a server or a browser

ASSIGNMENT = "03-qkv"

HELPERS = '''def _causal_bias(L, S, like):
    """-inf above the diagonal."""
    upper = torch.ones(L, S, dtype=torch.bool, device=like.device).triu(1)
    return torch.zeros(L, S, dtype=like.dtype, device=like.device).masked_fill(upper, float("-inf"))


def _mask_bias(attn_mask, like):
    if attn_mask.dtype == torch.bool:
        return torch.zeros_like(attn_mask, dtype=like.dtype).masked_fill(~attn_mask, float("-inf"))
    return attn_mask.to(like.dtype)


def _stable_softmax(scores):
    shifted = scores - scores.amax(dim=-1, keepdim=True)
    exp = shifted.exp()
    return exp / exp.sum(dim=-1, keepdim=True)


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    factor = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = query.matmul(key.transpose(-2, -1)) * factor
    if is_causal:
        scores = scores + _causal_bias(query.shape[-2], key.shape[-2], scores)
    if attn_mask is not None:
        scores = scores + _mask_bias(attn_mask, scores)
    weights = _stable_softmax(scores)
    return weights.matmul(value), weights
'''

# HELPERS copied: the functions in another order, every name of the copier's own, comments added.
HELPERS_COPIED = '''def _softmax_last(s):
    # subtract the max for numerical stability
    m = s.amax(dim=-1, keepdim=True)
    e = (s - m).exp()
    return e / e.sum(dim=-1, keepdim=True)  # normalise rows


def _bias_from_mask(m, ref):
    # boolean masks: True means attend
    if m.dtype == torch.bool:
        return torch.zeros_like(m, dtype=ref.dtype).masked_fill(~m, float("-inf"))
    return m.to(ref.dtype)


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    # scale by 1/sqrt(d_k) unless told otherwise
    s_factor = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    att = query.matmul(key.transpose(-2, -1)) * s_factor
    if is_causal:
        att = att + _future_bias(query.shape[-2], key.shape[-2], att)
    if attn_mask is not None:
        att = att + _bias_from_mask(attn_mask, att)
    probs = _softmax_last(att)
    return probs.matmul(value), probs


def _future_bias(n_q, n_k, ref):
    # hide the future
    hidden = torch.ones(n_q, n_k, dtype=torch.bool, device=ref.device).triu(1)
    return torch.zeros(n_q, n_k, dtype=ref.dtype, device=ref.device).masked_fill(hidden, float("-inf"))
'''

HONEST = ["einsum", "functional_ops", "helpers", "loops_and_prints", "reference", "starter_only"]
COPIES = {frozenset({"helpers", "copier_of_helpers"}), frozenset({"einsum", "copier_of_einsum"})}


def _renamed(code: str) -> str:
    for old, new in [("weights", "attn"), ("scores", "logits"), ("minus_inf", "neg"), ("allowed", "keep")]:
        code = re.sub(rf"\b{old}\b", new, code)
    return code.replace("    d_k =", "    # the size of a key\n    d_k =")


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("class")
    corpus = {entry.name: entry for entry in load_corpus(ASSIGNMENT)}
    for name in ["einsum", "functional_ops", "loops_and_prints"]:
        make_submission(root, name, ASSIGNMENT, corpus[name].cells)
    make_submission(root, "reference", ASSIGNMENT)
    make_submission(root, "starter_only", ASSIGNMENT, answer_all=False)
    make_submission(root, "helpers", ASSIGNMENT, {"scaled_dot_product_attention": HELPERS})
    make_submission(root, "copier_of_helpers", ASSIGNMENT, {"scaled_dot_product_attention": HELPERS_COPIED})
    make_submission(root, "copier_of_einsum", ASSIGNMENT,
                    {gid: _renamed(code) for gid, code in corpus["einsum"].cells.items()})
    return root


def test_planted_copies_rank_above_every_honest_pair(planted, tmp_path):
    pairs = similarity(planted, ASSIGNMENT, tmp_path / "report.html")
    assert {frozenset({p.first, p.second}) for p in pairs[:2]} == COPIES
    honest = [p for p in pairs if frozenset({p.first, p.second}) not in COPIES]
    assert min(p.score for p in pairs[:2]) > 0.8 > 0.5 > max(p.score for p in honest)
    # the starter code is shared by everyone and counts for nothing
    assert all(p.score == 0 for p in pairs if "starter_only" in (p.first, p.second))


def test_the_report_opens_offline_with_the_matches_side_by_side(planted, tmp_path):
    out = tmp_path / "report.html"
    result = subprocess.run([sys.executable, "-m", "autograder", "similarity", str(planted), "--assignment",
                             ASSIGNMENT, "--out", str(out)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "copier_of" in result.stdout.splitlines()[0]
    page = out.read_text()
    assert not re.search(r"https?://|<script|<link|@import", page)  # nothing to fetch, nothing that runs
    first = re.search(r"<section id=[\"']pair-1[\"']>(.*?)</section>", page, re.S)[1]
    assert first.count("<pre>") == 2 and "<mark>" in first
    with open(out.with_suffix(".csv"), newline="", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(HONEST + ["copier_of_helpers", "copier_of_einsum"]) * 7 // 2  # every pair


def test_own_code_leaves_out_tests_and_locked_cells(planted):
    import nbformat

    notebook = nbformat.read(next((planted / "reference" / ASSIGNMENT).glob("*.ipynb")), 4)
    code = own_code(notebook)
    assert all(solution.strip() in code for solution in reference_code(ASSIGNMENT).values())
    assert "import torch" not in code  # the locked setup cell
    assert "check_project_qkv(" not in code and "Hidden tests" not in code  # test cells


def test_results_are_compared_too_and_too_few_students_say_so(planted, tmp_path):
    results = tmp_path / "RESULTS"
    for student in ["einsum", "copier_of_einsum"]:
        (results / "autograded" / student / ASSIGNMENT).mkdir(parents=True)
        for nb in (planted / student / ASSIGNMENT).glob("*.ipynb"):
            (results / "autograded" / student / ASSIGNMENT / nb.name).write_bytes(nb.read_bytes())
    (results / "results.json").write_text("[]")
    (pair,) = similarity(results, ASSIGNMENT, tmp_path / "r.html")
    assert pair.score > 0.8
    result = subprocess.run([sys.executable, "-m", "autograder", "similarity", str(planted / "einsum"),
                             "--assignment", ASSIGNMENT, "--out", str(tmp_path / "x.html")], capture_output=True, text=True)
    assert result.returncode == 2 and "nothing to compare" in result.stderr


def test_what_students_wrote_is_escaped_and_only_the_matches_are_marked():
    from autograder.instructor.similarity import MARK_END, MARK_START, Pair, html_report

    code = f"x = '<script>alert(1)</script>'\n{MARK_START}y = x < 2 & True{MARK_END}\n"
    page = html_report("03-qkv", [Pair("<b>ann</b>", "bo & co", (0.5, 1.0), 12, (code, code))], 2, 1)
    assert "<script" not in page and "&lt;script&gt;" in page and "<b>ann" not in page and "&lt;b&gt;ann" in page
    assert page.count("<mark>y = x &lt; 2 &amp; True</mark>") == 2 and "bo &amp; co" in page


def test_no_output_replaces_what_it_reads(tmp_path):
    """--out, or the list of pairs named after it (--out with .csv), never writes over RESULTS'
    record, a SUBMISSIONS folder or the release notebooks: refused, one line, exit 2."""
    from autograder.instructor.lms import LmsError

    results, submissions = tmp_path / "RESULTS", tmp_path / "SUBMISSIONS"
    (submissions / "ann" / ASSIGNMENT).mkdir(parents=True)
    results.mkdir()
    (results / "results.json").write_text("[]")
    (results / "grades.csv").write_text("student_id,assignment,score\n")
    (tmp_path / "link.html").symlink_to(results / "results.json")
    before = {p: p.read_bytes() for p in (results / "results.json", results / "grades.csv")}
    for folder, out, named in [(results, results / "grades.html", "grades.csv"),  # its .csv is grades.csv
                               (results, tmp_path / "link.html", "results.json"),
                               (submissions, submissions / "report.html", "SUBMISSIONS"),
                               (results, tmp_path / "pairs.csv", "the same file as --out")]:
        with pytest.raises(LmsError, match=named):
            similarity(folder, ASSIGNMENT, out)
    result = subprocess.run([sys.executable, "-m", "autograder", "similarity", str(results), "--assignment", ASSIGNMENT,
                             "--out", str(results / "grades.html")], capture_output=True, text=True)
    assert result.returncode == 2 and "would overwrite" in result.stderr and len(result.stderr.splitlines()) == 1
    assert {p: p.read_bytes() for p in before} == before
    assert not (results / "grades.html").exists() and not (submissions / "report.html").exists()
