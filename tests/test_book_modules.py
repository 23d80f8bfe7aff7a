"""book/transformer.py, the model chapter 08 trains and chapter 04 looks into, computes what
PyTorch computes.

Every attention, every layer and every stack of the model is held equal to a fresh PyTorch
module loaded with its weights, under every kind of mask PyTorch accepts: boolean masks in
nn.MultiheadAttention's convention (True = may not attend) and, for the attentions, in
F.scaled_dot_product_attention's (True = may attend), and float masks, which are *added* to
the scores, with -inf and with the sources' -1e9. The whole model is held equal to one
assembled here from nn.Embedding, the paper's sinusoids and nn.Transformer, and every public
name of the module has a check of its own. What the exercises grade (the sinusoids, teacher
forcing's shifted input, greedy decoding with a plain model) is in coursebuild/reversal.py, which
trains the model at build time and is never published; its versions are checked here too, and
no module or page students get defines a graded name.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from classroom import REPO

sys.path.insert(0, str(REPO / "book"))
import transformer as course  # noqa: E402
from coursebuild import reversal  # noqa: E402

E, H, FF, VOCAB = 16, 2, 32, 13


def float_mask(not_allowed: torch.Tensor, value: float) -> torch.Tensor:
    """The boolean mask (True = may not attend) as a float mask added to the scores."""
    return torch.zeros(not_allowed.shape, dtype=torch.float64).masked_fill(not_allowed, value)


# The same mask in each of the forms the modules take: True = may not attend, or a float mask.
MASK_FORMS = {
    "bool": lambda m: m,
    "float -inf": lambda m: float_mask(m, float("-inf")),
    "float -1e9": lambda m: float_mask(m, -1e9),
}


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    model = course.Seq2Seq(VOCAB, d_model=E, nhead=H, num_layers=2, dim_feedforward=FF)
    model.pe.copy_(reversal.positional_encoding(*model.pe.shape))  # as coursebuild builds it
    return model.double().eval()


@pytest.fixture(scope="module")
def data():
    gen = torch.Generator().manual_seed(1)
    src = torch.randn(2, 5, E, generator=gen, dtype=torch.float64)
    tgt = torch.randn(2, 4, E, generator=gen, dtype=torch.float64)
    src_pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])  # the second source ends in padding
    tgt_pad = torch.tensor([[False] * 4, [False] * 3 + [True]])
    return src, tgt, src_pad, tgt_pad, nn.Transformer.generate_square_subsequent_mask(4).isinf()


def _named(model, kind: str):
    """The model's submodules of one kind, by their names (PyTorch's, so the same before and after)."""
    patterns = {"attention": lambda n: n.endswith(("self_attn", "multihead_attn")),
                "encoder layer": lambda n: n.startswith("transformer.encoder.layers.") and n.count(".") == 3,
                "decoder layer": lambda n: n.startswith("transformer.decoder.layers.") and n.count(".") == 3}
    found = {name: m for name, m in model.named_modules() if patterns[kind](name)}
    assert found, f"the model has no {kind}"
    return found


def _loaded(reference: nn.Module, module: nn.Module) -> nn.Module:
    reference.load_state_dict(module.state_dict())
    return reference.double().eval()


@pytest.mark.parametrize("form", MASK_FORMS)
def test_every_attention_equals_nn_multihead_attention(model, data, form):
    src, tgt, src_pad, _, causal = data
    for name, attn in _named(model, "attention").items():
        reference = _loaded(nn.MultiheadAttention(E, H, batch_first=True), attn)
        query = tgt if "decoder" in name else src
        key = src if "multihead_attn" in name or "encoder" in name else tgt
        masks = dict(key_padding_mask=src_pad if key is src else None,
                     attn_mask=causal if ("self_attn" in name and "decoder" in name) else None)
        ours = {k: None if m is None else MASK_FORMS[form](m) for k, m in masks.items()}
        out, weights = attn(query, key, key, **ours, average_attn_weights=False)
        ref_out, ref_weights = reference(query, key, key, **masks, average_attn_weights=False)
        torch.testing.assert_close(weights, ref_weights, msg=f"{name}, {form} mask: weights")
        torch.testing.assert_close(out, ref_out, msg=f"{name}, {form} mask: output")
        if key is src:  # a padded key gets no weight at all, whatever the form of its mask
            assert weights.masked_select(src_pad[:, None, None, :]).abs().max() == 0, f"{name}, {form}"


def test_every_attention_equals_scaled_dot_product_attention_with_its_convention(model, data):
    """F.scaled_dot_product_attention's boolean mask means the opposite (True = may attend):
    the model's masks, inverted, give the same output there."""
    src, tgt, _, tgt_pad, causal = data
    not_allowed = causal[None] | tgt_pad[:, None, :]  # (B, T, T): the decoder's self-attention
    for name, attn in _named(model, "attention").items():
        w_q, w_k, w_v = attn.in_proj_weight.chunk(3)
        b_q, b_k, b_v = attn.in_proj_bias.chunk(3)
        heads = lambda x, w, b: F.linear(x, w, b).unflatten(-1, (H, E // H)).transpose(1, 2)  # (B, H, T, E/H)
        out = F.scaled_dot_product_attention(heads(tgt, w_q, b_q), heads(tgt, w_k, b_k), heads(tgt, w_v, b_v),
                                             attn_mask=~not_allowed[:, None])  # True = may attend
        expected = attn.out_proj(out.transpose(1, 2).flatten(2))
        ours = attn(tgt, tgt, tgt, attn_mask=causal, key_padding_mask=tgt_pad, need_weights=False)[0]
        torch.testing.assert_close(ours, expected, msg=name)


@pytest.mark.parametrize("form", MASK_FORMS)
def test_every_encoder_layer_and_the_stack_equal_pytorchs(model, data, form):
    src, _, src_pad, _, _ = data
    pad = MASK_FORMS[form](src_pad)
    for name, layer in _named(model, "encoder layer").items():
        reference = _loaded(nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, batch_first=True), layer)
        torch.testing.assert_close(layer(src, src_key_padding_mask=pad),
                                   reference(src, src_key_padding_mask=src_pad), msg=f"{name}, {form} mask")
    stack = model.transformer.encoder
    reference = _loaded(nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, batch_first=True),
                                              2, norm=nn.LayerNorm(E), enable_nested_tensor=False), stack)
    kept = ~src_pad  # a padded position's output is never read
    torch.testing.assert_close(stack(src, src_key_padding_mask=pad)[kept],
                               reference(src, src_key_padding_mask=src_pad)[kept], msg=f"{form} mask")


@pytest.mark.parametrize("form", MASK_FORMS)
def test_every_decoder_layer_and_the_stack_equal_pytorchs(model, data, form):
    src, tgt, src_pad, tgt_pad, causal = data
    masks = dict(tgt_mask=causal, tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
    ours = {k: MASK_FORMS[form](m) for k, m in masks.items()}
    for name, layer in _named(model, "decoder layer").items():
        reference = _loaded(nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, batch_first=True), layer)
        torch.testing.assert_close(layer(tgt, src, **ours), reference(tgt, src, **masks), msg=f"{name}, {form}")
    reference = _loaded(nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, batch_first=True),
                                              2, norm=nn.LayerNorm(E)), model.transformer.decoder)
    torch.testing.assert_close(model.transformer.decoder(tgt, src, **ours), reference(tgt, src, **masks))


def test_the_model_is_embeddings_plus_the_papers_sinusoids_then_nn_transformer(model):
    """Seq2Seq equals the model assembled here, with PyTorch's float causal mask: no sqrt(d_model)
    factor on the embeddings, every mask in its place."""
    src = torch.tensor([[3, 4, 5, 6, 7], [8, 9, 10, 0, 0]])
    tgt_in = torch.tensor([[1, 7, 6, 5], [1, 10, 9, 0]])
    pe = torch.tensor([[math.sin(p / 10000 ** (i / E)) if i % 2 == 0 else math.cos(p / 10000 ** ((i - 1) / E))
                        for i in range(E)] for p in range(5)], dtype=torch.float64)
    reference = _loaded(nn.Transformer(E, H, 2, 2, FF, dropout=0.0, batch_first=True), model.transformer)
    src_pad, tgt_pad = float_mask(src == 0, float("-inf")), float_mask(tgt_in == 0, float("-inf"))
    out = reference(model.src_embed(src) + pe, model.tgt_embed(tgt_in) + pe[:4],
                    tgt_mask=nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64),
                    src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
    kept = tgt_in != 0  # a padded target position's logits are never used
    torch.testing.assert_close(model(src, tgt_in)[kept], model.generator(out)[kept])


def test_the_positional_encoding_is_the_papers():
    pe = reversal.positional_encoding(50, 8)
    assert pe.shape == (50, 8) and pe.dtype == torch.float32
    for pos, i in [(0, 0), (1, 0), (7, 2), (49, 3)]:  # feature 2i: sin, 2i + 1: cos
        angle = pos / 10000 ** (2 * i / 8)
        assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
        assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_teacher_forcing_and_greedy_decoding_agree(model):
    """shift_right puts the start token first; Seq2Seq.generate's output is what teacher forcing
    predicts when it is fed that same output."""
    tgt = torch.tensor([[7, 8, 9], [4, 5, 0]])
    assert reversal.shift_right(tgt, 1).tolist() == [[1, 7, 8], [1, 4, 5]]
    assert tgt.tolist() == [[7, 8, 9], [4, 5, 0]]  # unchanged
    src = torch.tensor([[3, 4, 5, 6, 7], [8, 9, 10, 0, 0]])
    generated = model.generate(src, 1, 6)  # (2, 6)
    with torch.no_grad():
        teacher_forced = model(src, reversal.shift_right(generated, 1)).argmax(-1)
    assert torch.equal(generated, teacher_forced)


def test_every_public_name_is_checked_here():
    assert set(course.__all__) == {"Seq2Seq"}, "a name of book/transformer.py without a check against PyTorch"


def _defined_names(code: str) -> set[str]:
    import ast

    return {node.name for node in ast.walk(ast.parse(code))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def test_no_published_module_or_page_defines_a_graded_name():
    """book/ is published (the site, the student distribution, Colab): none of its modules and
    none of its pages' code cells defines a function or class under a graded name, but the cells
    tagged as an assignment's answers (``answers:<assignment>``), which the students' edition
    withholds until that assignment is revealed (publish.WITHHELD); the book's working versions
    live in coursebuild/, which is not published. (The publish scan also tries every published
    function as each graded name.)"""
    from attention_checks import registry
    from autograder.instructor.publish import ANSWER_DEFINITIONS, ANSWERS_TAG
    from classroom.site import chapter_notebooks

    graded = {check.name for check in registry.load_all().values()}
    assert {"causal_mask", "apply_rope", "beam_search", "greedy_decode"} <= graded
    sources = {path.name: path.read_text() for path in (REPO / "book").glob("*.py")}
    answers = 0
    for page in chapter_notebooks().chapters():
        nb = chapter_notebooks().notebook(page)
        shown = [c for c in nb.cells if c.cell_type == "code" and not c.source.startswith("%")]
        withheld = [c for c in shown if any(str(t).startswith(ANSWERS_TAG) for t in c.metadata.get("tags", []))]
        answers += len(withheld)
        sources[page.name] = "\n".join(c.source for c in shown if c not in withheld)
    assert answers >= 10  # the answer cells of 08 and 10 are told apart (their tags reach the notebooks)
    assert len(sources) >= 15
    # a definition publish withholds by name (Seq2Seq.generate) keeps its signature and raises: no answer
    withheld = {Path(file).name: {qualified.rsplit(".", 1)[-1] for qualified in names}
                for file, names in ANSWER_DEFINITIONS.items()}
    for name, code in sources.items():
        defined = _defined_names(code) - withheld.get(name, set())
        assert not defined & graded, f"{name} defines {sorted(defined & graded)}"
    build_only = (REPO / "coursebuild" / "chargpt.py").read_text() + (REPO / "coursebuild" / "reversal.py").read_text()
    assert {"apply_rope", "beam_search", "shift_right"} <= _defined_names(build_only) & graded  # the check sees them
