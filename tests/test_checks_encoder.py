"""What is specific to 06-encoder's checks: PyTorch's own modules earn nothing, references and
the given layer agree with PyTorch, the cases build modules as they say, the TF32 and float64
tolerances, diagnoses the corpus does not cover, and the grader's verdict equals the kernel's.
(Layout, full marks, stub and corpus: tests/test_declared_checks.py.)"""
from __future__ import annotations

import contextlib
import copy
import io
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from attention_checks import CheckFailed
from attention_checks import encoder as enc
from attention_checks.answers.encoder import encoder_layer_reference, positional_encoding_reference
from attention_checks.answers.judging import answer_for, judge_records, judged
from attention_checks.core import generator, with_defaults
from attention_checks.encoder import (
    check_encoder,
    check_encoder_layer,
    check_feed_forward,
    check_layer_norm,
    check_positional_encoding,
)
from attention_checks.probe import probe_all
from attention_checks.record import _encode_outcome
from classroom.notebook import SourceNotebook, check_report, run_test_cell, tf32

NB = SourceNotebook("06-encoder")
CPU = torch.device("cpu")
REFERENCE = NB.student()


LAYER_CASES = [dict(), dict(src_mask="causal"), dict(padding=True), dict(src_mask="random", padding=True)]


# --------------------------------------------------------------------------
# forbidden APIs


def _layer_norm_calling(how: str):
    ln_cls = REFERENCE["LayerNorm"]

    class Cheat(ln_cls):
        def forward(self, x):
            args = (x, self.normalized_shape, self.weight, self.bias, self.eps)
            if how == "F":
                return F.layer_norm(*args)
            if how == "torch":
                return torch.layer_norm(*args)
            if how == "aten":
                return torch.ops.aten.native_layer_norm.default(*args)[0]
            if how == "swallowed":
                try:
                    F.layer_norm(*args)
                    raise RuntimeError("hide it")
                except RuntimeError:
                    return super().forward(x)
            if how == "module":
                return nn.LayerNorm(self.normalized_shape, self.eps).to(x)(x) * self.weight + self.bias
            raise AssertionError(how)

    return Cheat


@pytest.mark.parametrize("how", ["F", "torch", "aten", "swallowed", "module"])
def test_layer_norm_from_pytorch_earns_nothing(how):
    points, report = check_report(check_layer_norm, _layer_norm_calling(how), [dict(), dict(init=True)])
    assert points == 0 and "earns no points" in report and "LayerNorm calls" in report, report


def _encoder_layer_using(how: str):
    layer_cls = REFERENCE["EncoderLayer"]
    if how == "subclass":
        class Cheat(nn.TransformerEncoderLayer):
            def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1):
                super().__init__(d_model, nhead, dim_feedforward, dropout, batch_first=True)

            def forward(self, src, src_mask=None, src_key_padding_mask=None):
                return super().forward(src, src_mask, src_key_padding_mask)
        return Cheat

    class Cheat(layer_cls):  # noqa: F811
        def forward(self, src, src_mask=None, src_key_padding_mask=None):
            if how == "fused":  # PyTorch's fused kernel, called directly
                torch._transformer_encoder_layer_fwd(
                    src, src.shape[-1], self.self_attn.num_heads, self.self_attn.in_proj_weight,
                    self.self_attn.in_proj_bias, self.self_attn.out_proj.weight, self.self_attn.out_proj.bias,
                    False, False, 1e-5, self.norm1.weight, self.norm1.bias, self.norm2.weight, self.norm2.bias,
                    self.linear1.weight, self.linear1.bias, self.linear2.weight, self.linear2.bias, None, None)
                return super().forward(src, src_mask, src_key_padding_mask)
            if how == "built in forward":
                twin = nn.TransformerEncoderLayer(src.shape[-1], self.self_attn.num_heads, self.linear1.out_features,
                                                  0.0, batch_first=True).to(src)
                twin.load_state_dict(self.state_dict())
                return twin.eval()(src, src_mask, src_key_padding_mask)
            if how == "unused submodule":
                self.spare = nn.TransformerEncoderLayer(4, 1, 8)
                return super().forward(src, src_mask, src_key_padding_mask)
            raise AssertionError(how)

    return Cheat


@pytest.mark.parametrize("how", ["subclass", "fused", "built in forward", "unused submodule"])
def test_encoder_layer_from_pytorch_earns_nothing(how):
    points, report = check_report(check_encoder_layer, _encoder_layer_using(how), [dict(), dict(padding=True)])
    name = "torch._transformer_encoder_layer_fwd" if how == "fused" else "nn.TransformerEncoderLayer"
    assert points == 0 and f"EncoderLayer calls {name}" in report, report


def test_encoder_from_pytorch_earns_nothing():
    class Wrapper(nn.Module):
        def __init__(self, layer, num_layers):
            super().__init__()
            twin = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
            self.inner = nn.TransformerEncoder(twin, num_layers, enable_nested_tensor=False)
            self.layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(num_layers))

        def forward(self, src, mask=None, src_key_padding_mask=None):
            self.inner.eval()(src)
            for layer in self.layers:
                src = layer(src, mask, src_key_padding_mask)
            return src

    points, report = check_report(check_encoder, Wrapper, [dict()])
    assert points == 0 and "nn.TransformerEncoder" in report, report


def test_allowed_modules_are_not_flagged():
    """nn.MultiheadAttention and nn.LayerNorm inside EncoderLayer are allowed, and the layer
    the Encoder check hands over is not a PyTorch encoder class."""
    assert check_report(check_encoder_layer, REFERENCE["EncoderLayer"], LAYER_CASES)[0] == 1
    assert check_report(check_encoder, REFERENCE["Encoder"], [dict(padding=True)])[0] == 1
    assert not isinstance(enc.GivenEncoderLayer(8, 2, 16), (nn.TransformerEncoderLayer, nn.TransformerEncoder))


def test_the_given_layer_is_no_answer_to_encoder_layer():
    """The only encoder layer a grading kernel holds is pre-norm: handed in as EncoderLayer it
    earns nothing (and is named, like PyTorch's own)."""
    points, report = check_report(check_encoder_layer, enc.GivenEncoderLayer, [dict()])
    assert points == 0 and "GivenEncoderLayer" in report, report


# --------------------------------------------------------------------------
# references


def _torch_layer(E=8, nhead=2, F_=16, seed=0):
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(E, nhead, F_, 0.1, batch_first=True, dtype=torch.float64).eval()
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return layer


@pytest.mark.parametrize("spec", [dict(), dict(src_mask="causal"), dict(padding=True, batch=3, L=6),
                                  dict(src_mask="random", padding=True, L=7, E=12, nhead=3, F=10)])
@pytest.mark.parametrize("norm_first", [False, True])
def test_functional_reference_and_given_layer_agree_with_pytorch(spec, norm_first):
    x = check_encoder_layer.build(dict(spec, dtype="float64")).as_reference()
    c = check_encoder_layer.spec(spec)
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(c["E"], c["nhead"], c["F"], 0.1, batch_first=True, norm_first=norm_first,
                                       dtype=torch.float64).eval()
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(0.3 * torch.randn_like(p))
    p = {k: v.detach() for k, v in layer.state_dict().items()}
    src, pad = x.args["src"], x.extra["pad"]
    with torch.enable_grad():
        want = layer(src, **x.kwargs).detach()
    real = torch.ones(src.shape[:2], dtype=torch.bool) if pad is None else ~pad
    mine = encoder_layer_reference(p, c["nhead"], src, x.kwargs.get("src_mask"), pad, pre_norm=norm_first)
    torch.testing.assert_close(mine[real], want[real])
    if norm_first:
        given = enc.GivenEncoderLayer(c["E"], c["nhead"], c["F"]).double().eval()
        given.load_state_dict(layer.state_dict())
        with torch.no_grad():
            torch.testing.assert_close(given(src, **x.kwargs)[real], want[real])


def test_positional_encoding_reference():
    pe = positional_encoding_reference(50, 16)
    assert pe.dtype == torch.float64 and pe.shape == (50, 16)
    assert torch.equal(pe[0], torch.tensor([0.0, 1.0] * 8, dtype=torch.float64))
    assert pe[3, 4].item() == pytest.approx(math.sin(3 / 10000 ** (4 / 16)))
    assert pe[7, 5].item() == pytest.approx(math.cos(7 / 10000 ** (4 / 16)))
    # the book's form of the frequencies, exp(-2i ln(10000) / d)
    angle = torch.arange(50.0, dtype=torch.float64)[:, None] * torch.exp(
        -torch.arange(0, 16, 2, dtype=torch.float64) * math.log(10000.0) / 16)
    torch.testing.assert_close(pe[:, 0::2], angle.sin())
    torch.testing.assert_close(pe[:, 1::2], angle.cos())


class _Stop(Exception):
    pass


@pytest.mark.parametrize("spec, args", [(dict(), ((8,), {})), (dict(as_tuple=True), (((8,),), {})),
                                        (dict(dims=2, eps=0.1), (((5, 8),), dict(eps=0.1)))])
def test_layer_norm_is_built_as_the_case_says(spec, args):
    def build(*a, **k):
        raise _Stop(a, k)

    with pytest.raises(_Stop) as stop:
        check_layer_norm.call(build, check_layer_norm.build(spec), check_layer_norm.spec(spec))
    assert stop.value.args == args


# --------------------------------------------------------------------------
# cases: inputs, masks, weights


def test_running_the_student_module_leaves_the_global_rng_alone():
    state = torch.random.get_rng_state()
    for check, spec, name in [(check_encoder, dict(padding=True), "Encoder"), (check_encoder_layer, dict(), "EncoderLayer"),
                              (check_feed_forward, dict(), "FeedForward")]:
        check.call(REFERENCE[name], check.build(spec), check.spec(spec))  # builds modules: draws their weights
    assert torch.equal(torch.random.get_rng_state(), state)


def test_float32_and_float64_cases_see_the_same_numbers():
    a = judged(check_encoder_layer, dict(seed=7)).expected["output"]
    b = judged(check_encoder_layer, dict(seed=7, dtype="float64")).expected["output"]
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spec", [dict(src_mask="causal", padding=True), dict(src_mask="random", padding=True),
                                  dict(src_mask="random"), dict(padding=True, L=2, batch=6)])
def test_masks_never_hide_a_whole_row_of_a_real_token(spec):
    c = with_defaults(dict(spec, L=spec.get("L", 6), batch=spec.get("batch", 4)), enc.LAYER_DEFAULTS)
    for seed in range(20):
        m, pad, _ = enc._masks(c, generator(seed))
        B, L = c["batch"], c["L"]
        blocked = torch.zeros(B, L, L, dtype=torch.bool)
        if m is not None:
            blocked |= m
        if pad is not None:
            blocked |= pad[:, None, :]
            assert (~pad).any(-1).all() and pad.any(-1).all()  # a real token and a pad: inverted, keys remain
        real = torch.ones(B, L, dtype=torch.bool) if pad is None else ~pad
        assert (~blocked).any(-1)[real].all()


def test_every_layer_of_a_stack_gets_its_own_weights():
    spec = dict(num_layers=3)
    x = check_encoder.build(spec)
    weights = [v for k, v in x.extra["state"].items() if k.endswith("linear1.weight")]
    assert len(weights) == 3 and not torch.equal(weights[0], weights[1])
    case = judged(check_encoder, spec)
    shared = answer_for(check_encoder).mistakes(case.x, case.spec, case.expected)["shared last"].outputs["output"]
    assert not torch.allclose(shared, case.expected["output"])


def test_padded_positions_are_not_compared():
    layer_cls = REFERENCE["EncoderLayer"]

    class NaNAtPadding(layer_cls):
        def forward(self, src, src_mask=None, src_key_padding_mask=None):
            out = super().forward(src, src_mask, src_key_padding_mask)
            if src_key_padding_mask is not None:
                out = out.masked_fill(src_key_padding_mask[..., None], float("nan"))
            return out

    assert check_report(check_encoder_layer, NaNAtPadding, LAYER_CASES)[0] == 1


def test_unknown_or_impossible_cases_are_instructor_errors():
    for check, spec in [(check_layer_norm, dict(E_=3)), (check_positional_encoding, dict(d_model=7)),
                        (check_feed_forward, dict(train=True)), (check_encoder_layer, dict(src_mask="upper")),
                        (check_encoder_layer, dict(L=1, padding=True)), (check_encoder, dict(E=9, nhead=2))]:
        with pytest.raises(ValueError):
            check(lambda *a, **k: None, points=1, cases=[spec], device=CPU)


# --------------------------------------------------------------------------
# tolerances: TF32 matmuls pass, float32 work on float64 inputs fails


def _linear(x, w, b):
    if x.dtype == torch.float32:
        return tf32(x) @ tf32(w).T + b
    return x @ w.T + b


def _mm(a, b):
    return tf32(a) @ tf32(b) if a.dtype == torch.float32 else a @ b


class _TF32Attention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.in_proj_weight = nn.Parameter(torch.zeros(3 * embed_dim, embed_dim))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim))
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        B, L, E = x.shape
        H = self.num_heads
        q, k, v = _linear(x, self.in_proj_weight, self.in_proj_bias).chunk(3, dim=-1)
        q, k, v = (t.reshape(B, L, H, E // H).transpose(1, 2).contiguous() for t in (q, k, v))
        scores = _mm(q, k.transpose(-2, -1).contiguous()) / math.sqrt(E // H)
        if attn_mask is not None:
            scores = scores.masked_fill(attn_mask, float("-inf"))
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        out = _mm(scores.softmax(-1), v).transpose(1, 2).reshape(B, L, E)
        return _linear(out, self.out_proj.weight, self.out_proj.bias)


class _TF32FeedForward(nn.Module):
    def __init__(self, d_model, dim_feedforward, dropout=0.1):
        super().__init__()
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)

    def forward(self, x):
        h = torch.relu(_linear(x, self.linear1.weight, self.linear1.bias))
        return _linear(h, self.linear2.weight, self.linear2.bias)


class _TF32EncoderLayer(nn.Module):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1):
        super().__init__()
        self.self_attn = _TF32Attention(d_model, nhead)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, src, src_mask=None, src_key_padding_mask=None):
        h = self.norm1(src + self.self_attn(src, src_mask, src_key_padding_mask))
        ff = _linear(torch.relu(_linear(h, self.linear1.weight, self.linear1.bias)), self.linear2.weight,
                     self.linear2.bias)
        return self.norm2(h + ff)


def test_float32_tolerance_holds_for_tf32_matmuls(monkeypatch):
    """Every test cell of the modules with matmuls passes with TF32-rounded matmuls."""
    namespace = dict(REFERENCE, FeedForward=_TF32FeedForward, EncoderLayer=_TF32EncoderLayer)
    for gid, cell in NB.tests.items():
        if any(f"check_{name}(" in cell.source for name in ("feed_forward", "encoder_layer")):
            points, message = run_test_cell(cell, namespace)
            assert points == NB.points(gid), message


def test_float64_inputs_computed_in_float32_fail():
    ln_cls = REFERENCE["LayerNorm"]

    class Float32Inside(ln_cls):
        def forward(self, x):
            return super().forward(x.float()).double()

    points, report = check_report(check_layer_norm, Float32Inside, [dict(dtype="float64", init=True)])
    assert points < 1 and "float32 precision only" in report, report


def test_outputs_keep_the_inputs_dtype():
    ffn_cls = REFERENCE["FeedForward"]

    class AlwaysFloat32(ffn_cls):
        def forward(self, x):
            return super().forward(x).float()

    points, report = check_report(check_feed_forward, AlwaysFloat32, [dict(), dict(dtype="float64")])
    assert 0 < points < 1 and "dtype float32, expected float64" in report, report


# --------------------------------------------------------------------------
# diagnoses the corpus does not cover


def _ln(**change):
    base = REFERENCE["LayerNorm"]

    class Buggy(base):
        def __init__(self, normalized_shape, eps=1e-5):
            super().__init__(normalized_shape, eps)
            if change.get("init_zeros"):
                nn.init.zeros_(self.weight)

        def forward(self, x):
            dims = tuple(range(-len(self.normalized_shape), 0))
            mean = x.mean(dims, keepdim=True)
            var = x.var(dims, keepdim=True, unbiased=False)
            eps = 1e-5 if change.get("default_eps") else self.eps
            xhat = (x - mean) / torch.sqrt(var + eps)
            if change.get("no_affine"):
                return xhat
            if change.get("swapped"):
                return xhat * self.bias + self.weight
            return xhat * self.weight + self.bias

    return Buggy


def _pe(**change):
    def pe(max_len, d_model):
        position = torch.arange(max_len, dtype=torch.float32)[:, None]
        two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
        power = two_i if change.get("no_d") else two_i / d_model
        angle = position * 10000.0 ** power if change.get("multiply") else position / 10000.0 ** power
        out = torch.zeros(max_len, d_model)
        out[:, 0::2], out[:, 1::2] = torch.sin(angle), torch.cos(angle)
        return out.T.contiguous() if change.get("transposed") else out

    return pe


def _layer(**change):
    base = REFERENCE["EncoderLayer"]

    class Buggy(base):
        def forward(self, src, src_mask=None, src_key_padding_mask=None):
            m = None if change.get("no_masks") else src_mask
            kpm = None if change.get("no_masks") or change.get("no_padding") else src_key_padding_mask
            attn = self.self_attn(src, src, src, attn_mask=m, key_padding_mask=kpm, need_weights=False)[0]
            act = (lambda t: t) if change.get("no_relu") else torch.relu
            if change.get("norm_sublayer_only"):
                h = src + self.norm1(attn)
                return h + self.norm2(self.linear2(act(self.linear1(h))))
            h = self.norm1(src + attn)
            ff = self.linear2(act(self.linear1(h)))
            if change.get("residual_from_input"):
                return self.norm2(src + ff)
            if change.get("no_ffn_residual"):
                return self.norm2(ff)
            return (self.norm1 if change.get("one_norm") else self.norm2)(h + ff)

    return Buggy


def _encoder(**change):
    base = REFERENCE["Encoder"]

    class Buggy(base):
        def forward(self, src, mask=None, src_key_padding_mask=None):
            layers = list(self.layers)[::-1] if change.get("reversed") else self.layers[:1] if change.get(
                "first_only") else self.layers
            for i, layer in enumerate(layers):
                m = None if change.get("no_mask") or (change.get("mask_first_only") and i) else mask
                kpm = src_key_padding_mask
                if change.get("inverted") and kpm is not None:
                    kpm = ~kpm
                src = layer(src, src_mask=m, src_key_padding_mask=kpm)
            return src

    return Buggy


@pytest.mark.parametrize("check, obj, cases, hint", [
    (check_layer_norm, _ln(no_affine=True), [dict()], "ignores weight and bias"),
    (check_layer_norm, _ln(swapped=True), [dict()], "weight and bias are swapped"),
    (check_layer_norm, _ln(init_zeros=True), [dict(init=True)], "weight = ones and bias = zeros"),
    (check_layer_norm, _ln(default_eps=True), [dict(eps=0.1)], "ignores the eps given"),
    (check_positional_encoding, _pe(no_d=True), [dict()], "divide by d_model"),
    (check_positional_encoding, _pe(multiply=True), [dict()], "instead of dividing"),
    (check_positional_encoding, _pe(transposed=True), [dict(max_len=8, d_model=8)], "one row per position"),
    (check_encoder_layer, _layer(no_relu=True), [dict()], "ReLU of the feed-forward network is missing"),
    (check_encoder_layer, _layer(norm_sublayer_only=True), [dict()], "normalises the sum"),
    (check_encoder_layer, _layer(residual_from_input=True), [dict()], "not the layer's input"),
    (check_encoder_layer, _layer(no_ffn_residual=True), [dict()], "around the feed-forward network is missing"),
    (check_encoder_layer, _layer(one_norm=True), [dict()], "its own LayerNorm"),
    (check_encoder_layer, _layer(no_padding=True), [dict(padding=True)], "ignores src_key_padding_mask"),
    (check_encoder_layer, _layer(no_masks=True), [dict(padding=True, src_mask="causal")], "ignores its masks"),
    (check_encoder, _encoder(reversed=True), [dict(num_layers=3)], "in order"),
    (check_encoder, _encoder(first_only=True), [dict(num_layers=3)], "only the first layer"),
    (check_encoder, _encoder(no_mask=True), [dict(src_mask="causal")], "does not pass mask"),
    (check_encoder, _encoder(mask_first_only=True), [dict(src_mask="random")], "not only the first"),
    (check_encoder, _encoder(inverted=True), [dict(padding=True)], "src_key_padding_mask is inverted"),
])
def test_more_diagnoses(check, obj, cases, hint):
    points, report = check_report(check, obj, cases)
    assert points < 1 and hint in report, report


def test_readable_errors_when_the_weights_do_not_load():
    layer_cls = REFERENCE["EncoderLayer"]

    class Renamed(layer_cls):
        def __init__(self, *args):
            super().__init__(*args)
            self.attention = self.self_attn
            del self.self_attn

    points, report = check_report(check_encoder_layer, Renamed, [dict()])
    assert points == 0 and "yours lacks self_attn.in_proj_weight" in report and "and 0 more" not in report
    assert "has no attention.in_proj_weight" in report and "self_attn, linear1, linear2, norm1, norm2" in report

    class Wide(layer_cls):
        def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1):
            super().__init__(d_model, nhead, 2 * dim_feedforward, dropout)

    points, report = check_report(check_encoder_layer, Wide, [dict()])
    assert points == 0 and "size mismatch for linear1.weight" in report, report


def test_dropout_in_eval_mode_is_named_and_train_mode_cases_still_pass():
    ffn_cls = REFERENCE["FeedForward"]

    class AlwaysDropping(ffn_cls):
        def forward(self, x):
            return self.linear2(F.dropout(torch.relu(self.linear1(x)), self.dropout.p))

    points, report = check_report(check_feed_forward, AlwaysDropping, [dict(), dict(train=True, dropout=0.0)], points=2)
    assert points == 1 and "dropout must be off in eval mode" in report, report
    # random numbers are drawn from fixed seeds: the same verdict at every grading, even where
    # both calls happen to drop the same units (a single token with few hidden units)
    cases = [dict(batch=(1,), L=1, E=5, F=3, seed=s) for s in range(8)]
    state = torch.random.get_rng_state()
    first = check_report(check_feed_forward, AlwaysDropping, cases)
    assert all(check_report(check_feed_forward, AlwaysDropping, cases) == first for _ in range(3))
    assert torch.equal(torch.random.get_rng_state(), state)


# --------------------------------------------------------------------------
# the grader's side: recorded outcomes judged again outside the kernel


def _kernel_then_grader(check, obj, cases) -> tuple[tuple[float, str], tuple[float, str]]:
    """The verdict in the student's kernel, and the grader's verdict on what a grading kernel
    records (where the student's object is only a name and the references are rebuilt)."""
    kernel = check_report(check, obj, cases, points=2)
    probed = probe_all(check, obj, cases, CPU)
    record = dict(check=check.name, forbidden=probed.forbidden,
                  outcomes=[_encode_outcome(o, like) for o, like in zip(probed.outcomes, probed.likes)])
    report = judge_records(check, record, cases, points=2)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            score = report.deliver()
        except CheckFailed as failed:
            return kernel, (0.0, str(failed))
    return kernel, ((2.0 if score is None else float(score)), out.getvalue())


@pytest.mark.parametrize("check, obj, cases", [
    (check_layer_norm, "LayerNorm", [dict(), dict(init=True, dtype="float64"), dict(dims=2)]),
    (check_layer_norm, _layer_norm_calling("module"), [dict()]),
    (check_positional_encoding, "positional_encoding", [dict(), dict(max_len=4, d_model=4)]),
    (check_positional_encoding, _pe(multiply=True), [dict(), dict(max_len=4, d_model=4)]),
    (check_feed_forward, "FeedForward", [dict(), dict(train=True, dropout=0.0)]),
    (check_encoder_layer, "EncoderLayer", LAYER_CASES),
    (check_encoder_layer, _layer(no_padding=True), LAYER_CASES),
    (check_encoder_layer, _encoder_layer_using("subclass"), [dict()]),
    (check_encoder, "Encoder", [dict(padding=True, src_mask="causal", dtype="float64")]),
    (check_encoder, _encoder(first_only=True), [dict(), dict(padding=True)]),
])
def test_the_grader_reaches_the_same_verdict_from_the_record(check, obj, cases):
    obj = REFERENCE[obj] if isinstance(obj, str) else obj
    kernel, grader = _kernel_then_grader(check, obj, cases)
    assert kernel == grader


def test_batch_norm_over_a_batch_of_one_is_not_blamed_on_the_initialisation():
    """Over a batch of one, normalising each feature over dim 0 gives zeros, exactly what a new
    LayerNorm that starts at weight = 0 gives: the hint names both, never the initialisation alone."""
    base = REFERENCE["LayerNorm"]

    class OverTheBatch(base):
        def forward(self, x):
            mean, var = x.mean(0, keepdim=True), x.var(0, keepdim=True, unbiased=False)
            return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias

    _, report = check_report(check_layer_norm, OverTheBatch, [dict(dtype="float64", batch=(1,), L=3, E=6, init=True)])
    hint = next(line for line in report.splitlines() if line.strip().startswith("hint:"))
    assert "normalise over the wrong axis" in hint and "weight = ones" in hint, report
    assert "cannot tell them apart" in hint, report
