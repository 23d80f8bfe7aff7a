"""The grader's reading of the student's source (autograder/grading/scanner.py), cell by cell:
what a graded object can reach, and what tampers with the checks. Fast: no kernel."""
from __future__ import annotations

import textwrap

import pytest

from attention_checks.core import PRIVATE_IMPLEMENTATIONS, WATCH_SWITCHED_OFF
from autograder.grading.scanner import REGISTERS_OPERATORS, TOUCHES_CHECKS, Finding, SourceScanner, StudentObject

# The display names the checks pass (the last component is what a student writes).
SOFTMAX = ["torch.softmax", "torch.log_softmax", "F.softmin", "torch._softmax", "torch._log_softmax",
           "nn.Softmax", "nn.LogSoftmax", "torch.ops.aten.special_softmax"]
SDPA = ["F.scaled_dot_product_attention"]
MHA = ["F.multi_head_attention_forward", "nn.MultiheadAttention"]
LAYER_NORM = ["F.layer_norm", "torch.native_layer_norm", "nn.LayerNorm"]
ENCODER = ["torch._transformer_encoder_layer_fwd", "nn.TransformerEncoderLayer", "nn.TransformerEncoder"]

MHA_CLASS = """
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h = num_heads
        self.in_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        q, k, v = self.in_proj(x).chunk(3, -1)
        return self.out_proj(q.softmax(-1) * v)
"""
SCRATCH_LENDING_OUT_PROJ = """
torch_mha = nn.MultiheadAttention(8, 2, batch_first=True)
mine = MultiHeadAttention(8, 2)
mine.out_proj = torch_mha.out_proj  # the same output projection in both, to compare them
"""

SETUP = """
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
"""


def cells(*sources: str) -> list[str]:
    return [textwrap.dedent(s).strip() + "\n" for s in sources]


def found(graded: str, forbidden: list[str], *sources: str) -> list[str]:
    return SourceScanner(cells(*sources)).uses(StudentObject(graded), forbidden)


STABLE = """
def softmax(x, dim=-1):
    shifted = x - x.amax(dim=dim, keepdim=True)
    e = shifted.exp()
    return e / e.sum(dim=dim, keepdim=True)
"""

# -- fair: what a correct student writes, which must not count --------------------------------

FAIR = {
    "scratch loop comparing with torch.softmax": ("softmax", SOFTMAX, [STABLE, """
        for dim in (-1, 0, 1):
            x = torch.randn(4, 6)
            print(torch.allclose(softmax(x, dim), torch.softmax(x, dim)))
        """]),
    "scratch that feeds a torch.softmax result to softmax": ("softmax", SOFTMAX, [STABLE, """
        x = torch.softmax(torch.randn(3), 0)
        probs = softmax(x.log(), 0)
        """]),
    "a local named log_softmax": ("softmax", SOFTMAX, ["""
        def softmax(x, dim=-1):
            log_softmax = x - x.logsumexp(dim, keepdim=True)
            return log_softmax.exp()
        """]),
    "lambda binding over an own helper": ("softmax", SOFTMAX, ["""
        def _stable(x, dim):
            e = (x - x.amax(dim, keepdim=True)).exp()
            return e / e.sum(dim, keepdim=True)

        softmax = lambda x, dim=-1: _stable(x, dim)
        """, """
        for x in [torch.randn(3)]:
            dim = 0
            assert torch.allclose(softmax(x, dim), torch.softmax(x, dim))
        """]),
    "comprehension variable named like the API": ("softmax", SOFTMAX, ["""
        def softmax(x, dim=-1):
            rows = [log_softmax.exp() for log_softmax in [x - x.logsumexp(dim, keepdim=True)]]
            return rows[0]
        """]),
    "docstring and messages naming the API": ("softmax", SOFTMAX, ['''
        def softmax(x, dim=-1):
            """Like torch.softmax(x, dim), written by hand."""
            if not x.is_floating_point():
                raise TypeError("softmax needs floats, as torch.softmax does")
            e = (x - x.amax(dim, keepdim=True)).exp()
            return e / e.sum(dim, keepdim=True)
        ''']),
    "partial of an own function": ("scaled_dot_product_attention", SDPA, ["""
        import functools

        def _attention(query, key, value, attn_mask=None, is_causal=False, scale=None, *, fill):
            scores = query @ key.transpose(-2, -1) * (scale or query.size(-1) ** -0.5)
            weights = scores.softmax(-1)
            return weights @ value, weights

        scaled_dot_product_attention = functools.partial(_attention, fill=float("-inf"))
        """, """
        reference = F.scaled_dot_product_attention
        q = torch.randn(2, 3, 4)
        print(torch.allclose(scaled_dot_product_attention(q, q, q)[0], reference(q, q, q)))
        """]),
    "alias of an own class": ("LayerNorm", LAYER_NORM, ["""
        class MyLayerNorm(nn.Module):
            def __init__(self, normalized_shape, eps=1e-5):
                super().__init__()
                self.layer_norm_eps = eps

            def forward(self, x):
                layer_norm = (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True, unbiased=False) + 1e-5).sqrt()
                return layer_norm

        LayerNorm = MyLayerNorm
        """, """
        ref = nn.LayerNorm(8)
        x = torch.randn(2, 8)
        print(torch.allclose(LayerNorm(8)(x), ref(x)), torch.allclose(LayerNorm(8)(x), F.layer_norm(x, (8,))))
        """]),
    "scratch comparing MultiHeadAttention with nn.MultiheadAttention": ("MultiHeadAttention", MHA, ["""
        class MultiHeadAttention(nn.Module):
            def __init__(self, embed_dim, num_heads, bias=True):
                super().__init__()
                self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

            def forward(self, query, key, value, key_padding_mask=None, attn_mask=None):
                attn_output = self.out_proj(query)
                return attn_output, None
        """, """
        mha = nn.MultiheadAttention(8, 2, batch_first=True)
        query = key = value = torch.randn(2, 5, 8)
        attn_output, attn_weights = mha(query, key, value)
        mine = MultiHeadAttention(8, 2)
        mine.load_state_dict(mha.state_dict(), strict=False)
        print(torch.allclose(mine(query, key, value)[0], attn_output), vars(mha).keys())
        fast = torch.compile(mha)
        %timeit mha(query, key, value)
        """]),
    "own helper named like the API": ("MultiHeadAttention", MHA, ["""
        def multi_head_attention_forward(q, k, v):
            return (q @ k.transpose(-2, -1)).softmax(-1) @ v

        class MultiHeadAttention(nn.Module):
            def forward(self, query, key, value):
                return multi_head_attention_forward(query, key, value), None
        """]),
    "an encoder layer passed to Encoder in a scratch cell": ("Encoder", ENCODER, ["""
        class Encoder(nn.Module):
            def __init__(self, layer, num_layers):
                super().__init__()
                self.layers = nn.ModuleList([copy.deepcopy(layer) for _ in range(num_layers)])

            def forward(self, src, mask=None, src_key_padding_mask=None):
                assert all(m.training == self.training for layer in self.layers for m in layer.modules())
                for layer in self.layers:
                    src = layer(src, src_mask=mask, src_key_padding_mask=src_key_padding_mask)
                return src
        """, """
        ref_layer = nn.TransformerEncoderLayer(8, 2, batch_first=True)
        mine_layer = EncoderLayer(8, 2)
        mine_layer.load_state_dict(ref_layer.state_dict())
        ref = nn.TransformerEncoder(ref_layer, 2)
        mine = Encoder(mine_layer, 2)
        mine.load_state_dict(ref.state_dict())
        """]),
    # issue 58: a word in a string is data (an error label, a dictionary's key, a mode's name)
    "the API's name as an error label, a dictionary key and a mode": ("softmax", SOFTMAX, ["""
        MESSAGES = {"softmax": "expects a float tensor", "log_softmax": "unused"}
        """, """
        def softmax(x, dim=-1, kind="softmax"):
            if not x.is_floating_point():
                raise TypeError("softmax: " + MESSAGES["softmax"])
            stats = {"softmax": dim}
            shifted = x - x.amax(dim=stats["softmax"], keepdim=True)
            e = shifted.exp()
            return e / e.sum(dim=dim, keepdim=True) if kind != "log_softmax" else shifted - e.sum(dim, keepdim=True).log()
        """]),
    "the API's name as a label in a list and a print": ("LayerNorm", LAYER_NORM, ["""
        class LayerNorm(nn.Module):
            names = ["LayerNorm", "layer_norm"]

            def __init__(self, d, eps=1e-5):
                super().__init__()
                self.weight, self.bias, self.eps = nn.Parameter(torch.ones(d)), nn.Parameter(torch.zeros(d)), eps

            def forward(self, x):
                print(f"{self.names[0]}: normalising", "F.layer_norm".upper())
                mean, var = x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=False)
                return (x - mean) / (var + self.eps).sqrt() * self.weight + self.bias
        """]),
    "the notebook submitted from its last cell": ("softmax", SOFTMAX, [STABLE, """
        from attention_checks.submit import submit
        submit("https://grader.example.edu", "token")
        """]),
    "setup cell pasted again, checks documentation read": ("softmax", SOFTMAX, [STABLE, """
        try:
            from attention_checks.softmax_scaling import check_softmax, check_scaled_scores
        except ImportError:
            root = next(p for p in [Path.cwd()] if (p / "attention_checks").is_dir())
            sys.path.insert(0, str(root))
        from attention_checks.core import pick_device
        device = pick_device()
        """, """
        import attention_checks
        import attention_checks.softmax_scaling as checks
        help(attention_checks)
        print(checks.__doc__, attention_checks.__all__, attention_checks.TOLERANCES)
        help(check_softmax)
        import inspect
        print(inspect.getsource(check_softmax))
        """, """
        check_softmax(softmax, points=2, cases=[dict()])
        """]),
}


FAIR["scratch that lends PyTorch's out_proj to an instance of its own"] = (
    "MultiHeadAttention", MHA, [MHA_CLASS, SCRATCH_LENDING_OUT_PROJ])


@pytest.mark.parametrize("name", FAIR)
def test_fair_code_is_not_charged(name):
    graded, forbidden, sources = FAIR[name]
    assert found(graded, forbidden, SETUP, *sources) == []


# -- hostile: a forbidden function the graded object really reaches --------------------------

HOSTILE = {
    "direct call": ("softmax", SOFTMAX, "torch.softmax", ["""
        def softmax(x, dim=-1):
            return torch.softmax(x, dim)
        """], "return torch.softmax(x, dim)"),
    "F alias and tensor method": ("softmax", SOFTMAX, "torch.softmax", ["""
        def softmax(x, dim=-1):
            return x.softmax(dim)
        """], "return x.softmax(dim)"),
    "nnf alias imported in the cell": ("softmax", SOFTMAX, "torch.softmax", ["""
        import torch.nn.functional as nnf

        def softmax(x, dim=-1):
            return nnf.softmax(x, dim)
        """], "return nnf.softmax(x, dim)"),
    "from import under another name": ("softmax", SOFTMAX, "torch.log_softmax", ["""
        from torch.nn.functional import log_softmax as stable

        def softmax(x, dim=-1):
            return stable(x, dim).exp()
        """], "from torch.nn.functional import log_softmax as stable"),
    "getattr of a name built from pieces": ("softmax", SOFTMAX, "torch.softmax", ["""
        def softmax(x, dim=-1):
            return getattr(torch, "soft" + "max")(x, dim)
        """], 'return getattr(torch, "soft" + "max")(x, dim)'),
    "getattr of a name kept in a global": ("softmax", SOFTMAX, "torch.softmax", ["""
        _name = "".join(["soft", "max"])
        """, """
        def softmax(x, dim=-1):
            return getattr(torch, _name)(x, dim)
        """], '_name = "".join(["soft", "max"])'),
    # a string used as a name keeps counting, however it reaches the lookup (issue 58)
    "a module's namespace kept in a global, looked up by key": ("softmax", SOFTMAX, "torch.softmax", ["""
        _ns = vars(torch)
        """, """
        def softmax(x, dim=-1):
            return _ns["softmax"](x, dim)
        """], 'return _ns["softmax"](x, dim)'),
    "a name handed to a helper's getattr": ("softmax", SOFTMAX, "torch.softmax", ["""
        def _lookup(name):
            return getattr(torch, name)

        def softmax(x, dim=-1):
            return _lookup("soft" + "max")(x, dim)
        """], 'return _lookup("soft" + "max")(x, dim)'),
    "a name returned by a helper": ("softmax", SOFTMAX, "torch.softmax", ["""
        def _which():
            return "soft" + "max"

        def softmax(x, dim=-1):
            return getattr(torch, _which())(x, dim)
        """], 'return "soft" + "max"'),
    "a namespace's get": ("LayerNorm", LAYER_NORM, "F.layer_norm", ["""
        class LayerNorm(nn.Module):
            def forward(self, x):
                return F.__dict__.get("layer" + "_norm")(x, x.shape[-1:])
        """], 'return F.__dict__.get("layer" + "_norm")(x, x.shape[-1:])'),
    "an operator's name given to a private PyTorch function": ("softmax", SOFTMAX, "torch._softmax", ["""
        def softmax(x, dim=-1):
            return torch._C._jit_get_operation("aten::" + "_softmax")[0](x, dim, False)
        """], 'return torch._C._jit_get_operation("aten::" + "_softmax")[0](x, dim, False)'),
    "aten operator": ("softmax", SOFTMAX, "torch._softmax", ["""
        def softmax(x, dim=-1):
            return torch.ops.aten._softmax.default(x, dim, False)
        """], "return torch.ops.aten._softmax.default(x, dim, False)"),
    "alias through a helper, bound in a scratch cell": ("softmax", SOFTMAX, "torch.softmax", ["""
        def _keep(f):
            return f

        _impl = _keep(torch.softmax)
        """, """
        def softmax(x, dim=-1):
            return _impl(x, dim)
        """], "_impl = _keep(torch.softmax)"),
    "partial of torch.softmax": ("softmax", SOFTMAX, "torch.softmax", ["""
        import functools
        softmax = functools.partial(torch.softmax)
        """], "softmax = functools.partial(torch.softmax)"),
    "lambda closing over sdpa": ("scaled_dot_product_attention", SDPA, "F.scaled_dot_product_attention", ["""
        fast = F.scaled_dot_product_attention
        """, """
        scaled_dot_product_attention = lambda q, k, v, *a, **kw: (fast(q, k, v, *a, **kw), None)
        """], "fast = F.scaled_dot_product_attention"),
    "class attribute holding nn.LayerNorm": ("LayerNorm", LAYER_NORM, "nn.LayerNorm", ["""
        class LayerNorm(nn.Module):
            kind = nn.LayerNorm

            def __init__(self, shape, eps=1e-5):
                super().__init__()
                self.inner = self.kind(shape, eps)

            def forward(self, x):
                return self.inner(x)
        """], "kind = nn.LayerNorm"),
    "subclass of nn.MultiheadAttention": ("MultiHeadAttention", MHA, "nn.MultiheadAttention", ["""
        class MultiHeadAttention(nn.MultiheadAttention):
            pass
        """], "class MultiHeadAttention(nn.MultiheadAttention):"),
    "module-level instance used by forward": ("LayerNorm", LAYER_NORM, "nn.LayerNorm", ["""
        _norm = nn.LayerNorm(8)
        """, """
        class LayerNorm(nn.Module):
            def forward(self, x):
                return _norm(x)
        """], "_norm = nn.LayerNorm(8)"),
    "stored into a dict later": ("LayerNorm", LAYER_NORM, "F.layer_norm", ["""
        import functools
        kernels = {}
        kernels["norm"] = functools.partial(F.layer_norm)
        """, """
        class LayerNorm(nn.Module):
            def forward(self, x):
                return kernels["norm"](x, (8,))
        """], 'kernels["norm"] = functools.partial(F.layer_norm)'),
    "appended to a list": ("softmax", SOFTMAX, "torch.softmax", ["""
        impls = []
        def softmax(x, dim=-1):
            return impls[0](x, dim)
        impls.append(torch.softmax)
        """], "impls.append(torch.softmax)"),
    "written into builtins": ("softmax", SOFTMAX, "torch.softmax", ["""
        import builtins
        builtins.fast_norm = torch.softmax
        """, """
        def softmax(x, dim=-1):
            return fast_norm(x, dim)
        """], "builtins.fast_norm = torch.softmax"),
    "written through globals()": ("softmax", SOFTMAX, "torch.softmax", ["""
        globals()["helper"] = torch.softmax
        def softmax(x, dim=-1):
            return helper(x, dim)
        """], 'globals()["helper"] = torch.softmax'),
    "exec of code naming it": ("softmax", SOFTMAX, "torch.softmax", ["""
        exec("def softmax(x, dim=-1):\\n    return torch.softmax(x, dim)")
        """], 'exec("def softmax(x, dim=-1):\\n    return torch.softmax(x, dim)")'),
    "argument kept by the graded function": ("softmax", SOFTMAX, "torch.softmax", ["""
        _kept = []
        def softmax(x, dim=-1):
            if callable(x):
                _kept.append(x)
                return None
            return _kept[0](x, dim)
        softmax(torch.softmax)
        """], "softmax(torch.softmax)"),
    "mutable default filled by a call": ("softmax", SOFTMAX, "torch.softmax", ["""
        def softmax(x, dim=-1, _cache={}):
            if callable(x):
                _cache["f"] = x
                return None
            return _cache["f"](x, dim)
        """, """
        softmax(torch.softmax)
        """], "softmax(torch.softmax)"),
    "a global looked up through globals()": ("softmax", SOFTMAX, "torch.softmax", ["""
        _fast_path = torch.softmax
        """, """
        def softmax(x, dim=-1):
            return globals()["_fast" + "_path"](x, dim)
        """], "_fast_path = torch.softmax"),
    "a helper module written with %%writefile": ("softmax", SOFTMAX, "torch.softmax", ["""
        %%writefile fast_helpers.py
        import torch
        def normalise(x, dim):
            return torch.softmax(x, dim)
        """, """
        from fast_helpers import normalise

        def softmax(x, dim=-1):
            return normalise(x, dim)
        """], "%%writefile fast_helpers.py"),
    "a global looked up through sys.modules": ("softmax", SOFTMAX, "torch.softmax", ["""
        import sys
        _fast_path = torch.softmax
        def softmax(x, dim=-1):
            return getattr(sys.modules[__name__], "_fast_path")(x, dim)
        """], "_fast_path = torch.softmax"),
    "star import": ("softmax", SOFTMAX, "torch.log_softmax", ["""
        from torch.nn.functional import *

        def softmax(x, dim=-1):
            return log_softmax(x, dim).exp()
        """], "return log_softmax(x, dim).exp()"),
    "global statement in a helper": ("softmax", SOFTMAX, "torch.softmax", ["""
        impl = None
        def install():
            global impl
            impl = torch.softmax
        install()
        def softmax(x, dim=-1):
            return impl(x, dim)
        """], "impl = torch.softmax"),
    "nonlocal closure": ("softmax", SOFTMAX, "torch.softmax", ["""
        def make():
            f = None
            def set_it():
                nonlocal f
                f = torch.softmax
            set_it()
            return lambda x, dim=-1: f(x, dim)
        softmax = make()
        """], "f = torch.softmax"),
}


# where the instance a scratch cell changed can be the one graded, or graded code can reach it, the store counts
_SHARED = "torch_mha = nn.MultiheadAttention(8, 2, batch_first=True)"
HOSTILE.update({
    "a class whose __new__ hands out one object": ("MultiHeadAttention", MHA, "nn.MultiheadAttention", [
        MHA_CLASS.replace("    def __init__", "    def __new__(cls, *args):\n        return SHARED\n\n    def __init__"),
        SCRATCH_LENDING_OUT_PROJ], _SHARED),
    "a constructor that keeps every instance in a global": ("MultiHeadAttention", MHA, "nn.MultiheadAttention", [
        "EVERY = []\n" + MHA_CLASS.replace("super().__init__()", "super().__init__()\n        EVERY.append(self)")
        .replace("return self.out_proj(", "return EVERY[0].out_proj("), SCRATCH_LENDING_OUT_PROJ], _SHARED),
    "a decorated class": ("MultiHeadAttention", MHA, "nn.MultiheadAttention", [
        "def keep(c):\n    return c\n" + MHA_CLASS.replace("class MultiHeadAttention", "@keep\nclass MultiHeadAttention"),
        SCRATCH_LENDING_OUT_PROJ], _SHARED),
    "graded code that reads the scratch instance": ("MultiHeadAttention", MHA, "nn.MultiheadAttention", [
        MHA_CLASS.replace("return self.out_proj(", "return mine.out_proj("), SCRATCH_LENDING_OUT_PROJ],
        "torch_mha = nn.MultiheadAttention(8, 2, batch_first=True)"),
    "an instance of a class that is not the student's": ("MultiHeadAttention", MHA, "nn.MultiheadAttention", [
        MHA_CLASS, SCRATCH_LENDING_OUT_PROJ.replace("mine = MultiHeadAttention(8, 2)", "mine = nn.Module()")
        + "\nMultiHeadAttention.__init__ = lambda self, *a: None"], _SHARED),
})


@pytest.mark.parametrize("name", HOSTILE)
def test_hidden_forbidden_call_is_found_with_its_line(name):
    graded, forbidden, expected, sources, line = HOSTILE[name]
    hits = found(graded, forbidden, SETUP, *sources)
    assert expected in hits, hits
    hit = hits[hits.index(expected)]
    assert isinstance(hit, Finding) and isinstance(hit, str) and hit == expected
    assert hit.line == line, hit.line


def test_only_what_the_graded_object_reaches():
    sources = [SETUP, STABLE, """
        def scaled_scores(q, k):
            return torch.softmax(q @ k.transpose(-2, -1), -1)
        """]
    assert found("softmax", SOFTMAX, *sources) == []
    assert found("scaled_scores", SOFTMAX, *sources) == ["torch.softmax"]


def test_a_student_object_never_defined_is_not_charged():
    assert found("softmax", SOFTMAX, SETUP) == []
    assert SourceScanner(["def f(x): return torch.softmax(x, -1)\n"]).uses("not a student object", SOFTMAX) == []


def test_the_line_quoted_is_the_students_own_under_magics():
    hits = found("softmax", SOFTMAX, SETUP, """
        %matplotlib inline
        def softmax(x, dim=-1):
            !echo hi
            return torch.softmax(x, dim)
        """)
    assert hits == ["torch.softmax"] and hits[0].line == "return torch.softmax(x, dim)"


def test_cells_that_do_not_parse_are_skipped():
    assert found("softmax", SOFTMAX, SETUP, "def broken(:\n", STABLE, "%timeit softmax(torch.randn(3))") == []


# -- tampering with the checks ------------------------------------------------------------------

TAMPERING = {
    "patch a check module": "import attention_checks.qkv as qkv\nqkv.attention_reference = lambda *a: None",
    "import the machinery": "import attention_checks.core as core",
    "import the recorder's publish": "from attention_checks.record import publish",
    "from the package import the recorder": "from attention_checks import record",
    "sys.modules naming the recorder": 'import sys\nrecord = sys.modules["attention_checks.record"]',
    "sys.modules replaced": 'import sys\nsys.modules["attention_checks.qkv"] = None',
    "import_module of the machinery": 'import importlib\ncore = importlib.import_module("attention_checks." + "core")',
    "a check's globals": 'check_softmax.__globals__["publish"] = print',
    "setattr on the package": 'import attention_checks\nsetattr(attention_checks, "TOLERANCES", {})',
    "tolerances changed": "from attention_checks import TOLERANCES\nTOLERANCES['float32'] = (1, 1)",
    "alias of the package patched": "import attention_checks as ac\nchecks = ac\nchecks.core.run_check = None",
    "getattr of the machinery": 'import attention_checks\ngetattr(attention_checks, "record").publish = print',
}


def test_tampering_counts_even_without_forbidden_names():
    """01 and 05 have no forbidden API: tampering still forfeits their checks."""
    assert found("softmax", [], STABLE, TAMPERING["import the machinery"]) == [TOUCHES_CHECKS]
    assert found("softmax", [], STABLE, FAIR["setup cell pasted again, checks documentation read"][2][1]) == []


# -- registering operator kernels: PyTorch's own functions then compute something else ----------

REGISTERING = {
    "torch.library.Library": 'import torch\n_kept = torch.library.Library("aten", "IMPL")\n'
                             '_kept.impl("sigmoid", lambda x: x.softmax(-1), "CPU")',
    "from torch.library import": "from torch.library import Library, impl",
    "a decorator": 'import torch\n@torch.library.custom_op("mine::soft", mutates_args=())\ndef soft(x: torch.Tensor) -> torch.Tensor:\n'
                   '    return x.softmax(-1)',
    "a module named in a string": 'import importlib\nregistry = importlib.import_module("torch." + "library")',
    "the dispatcher's own": 'import torch\nm = torch._C._dispatch_library("IMPL", "aten", "")',
    "a compiled operator": 'import torch\ntorch.ops.load_library("/tmp/ops.so")',
}


ANYWHERE = [pytest.param(finding, source, id=f"{what}: {name}") for finding, what, table in
            [(TOUCHES_CHECKS, "tampering", TAMPERING), (REGISTERS_OPERATORS, "registering", REGISTERING)]
            for name, source in table.items()]


@pytest.mark.parametrize("finding, source", ANYWHERE)
def test_tampering_or_registering_anywhere_counts_against_every_graded_object(finding, source):
    """Touching the checks, or registering operator kernels: wherever it is in the notebook, the
    graded object forfeits, with the line that did it."""
    hits = found("softmax", SOFTMAX, SETUP, STABLE, source)
    assert hits == [finding] and hits[0].line and hits[0].line in source
    assert found("softmax", [], STABLE, source) == [finding]  # no forbidden API (01, 05)


def test_the_checks_named_in_a_string_used_as_data_are_no_tampering():
    """A message, a label or a dictionary key that names the checks' machinery is data (issue 58)."""
    own = 'notes = {"attention_checks.record": "where records come from"}\nprint("see attention_checks.core")\n'
    assert found("softmax", SOFTMAX, SETUP, STABLE, own) == []


def test_words_like_the_registration_apis_in_the_students_own_names_do_not_count():
    own = 'library = {"books": 3}\n"""the torch.library docs"""\nprint("see the library")\n'
    assert found("softmax", SOFTMAX, SETUP, STABLE, own) == []


# -- copies of the course's cells, where the grader rebuilds the notebook -------------------------


def test_pasted_setup_and_test_cells_are_recognised_as_copies(tmp_path):
    """Jupyter's copy and paste (same source and metadata, a new cell id) of the setup cell
    and of a test cell: the rebuilt notebook keeps each copy as an inert note, so neither runs
    twice, and the student's cells that remain do not tamper with the checks."""
    import nbformat

    from autograder.cells import is_student_cell
    from autograder.grading.rebuild import RebuildFromSource
    from classroom import REPO, make_submission, notebook_name

    assignment = "02-softmax-scaling"
    name = notebook_name(assignment)
    added = [("setup", "copy", "setup"), ("test_softmax", "copy", "setup"),
             ("softmax", "copy", "test_softmax"), ("test_softmax", "new", "print(softmax(torch.zeros(3)))\n")]
    path = make_submission(tmp_path, "student", assignment, added=added)
    submitted = nbformat.read(path, 4)
    source = nbformat.read(REPO / "solutions" / assignment / f"{name}.ipynb", 4)
    release = nbformat.read(REPO / "exercises" / assignment / f"{name}.ipynb", 4)
    rebuilt = RebuildFromSource().rebuild(submitted, source, release)

    assert len(rebuilt.cells) == len(source.cells) + len(added)
    notes = [c.source for c in rebuilt.cells if c.source.startswith("# A copy of the course's cell")]
    assert len(notes) == 3 and sum("'setup'" in n for n in notes) == 2
    assert sum("'test_softmax'" in n for n in notes) == 1
    setup = next(c.source for c in release.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "setup")
    assert [c.source for c in rebuilt.cells].count(setup) == 1  # only the course's own setup runs
    student = [c.source for c in rebuilt.cells if is_student_cell(c)]
    assert "print(softmax(torch.zeros(3)))\n" in student
    assert SourceScanner(student).uses(StudentObject("softmax"), SOFTMAX) == []
    # an edited copy is the student's own cell: kept, and still not tampering (public imports only)
    assert SourceScanner(student + [setup + "x = 1\n"]).uses(StudentObject("softmax"), SOFTMAX) == []


@pytest.mark.parametrize("magic", ["%%time", "%%capture out", "%%timeit -n1 -r1", "%%prun -q"])
def test_code_under_a_cell_magic_that_runs_python_is_read(magic):
    """A cell magic that runs its cell as Python hides nothing from the scan (issue 24)."""
    hidden = f"{magic}\ndef softmax(x, dim=-1):\n    return torch.softmax(x, dim)\n"
    assert found("softmax", SOFTMAX, SETUP, hidden) == ["torch.softmax"]
    honest = f"{magic}\n" + STABLE
    assert found("softmax", SOFTMAX, SETUP, honest) == []


PRIVATE = [PRIVATE_IMPLEMENTATIONS]  # alone: the attribute .softmax would count as torch.softmax too


@pytest.mark.parametrize("how", [
    "torch._refs.softmax(x, dim)",
    "getattr(torch, '_' + 'refs').softmax(x, dim)",
    "importlib.import_module('torch._decomp.decompositions')._softmax(x, dim, False)",
    "vars(torch._prims_common)",
])
def test_private_pytorch_namespaces_are_forbidden_in_graded_code(how):
    """torch._refs, torch._decomp and torch._prims hold PyTorch's own Python versions of what the
    students write: named in graded code in any way the scan can read, they count (issue 24)."""
    graded = f"import importlib\ndef softmax(x, dim=-1):\n    return {how}\n"
    assert found("softmax", PRIVATE, SETUP, graded) == [PRIVATE_IMPLEMENTATIONS]
    # used in a scratch cell that compares with the student's own, they do not
    scratch = f"x, dim = torch.randn(3), 0\nimport importlib\nprint(softmax(x), {how})\n"
    assert found("softmax", PRIVATE, SETUP, STABLE, scratch) == []


def test_switching_off_the_checks_watch_is_forbidden_in_graded_code():
    graded = "import sys\ndef softmax(x, dim=-1):\n    sys.setprofile(None)\n    return x\n"
    assert found("softmax", [WATCH_SWITCHED_OFF], SETUP, graded) == [WATCH_SWITCHED_OFF]
    assert found("softmax", [WATCH_SWITCHED_OFF], SETUP, STABLE, "import sys\nsys.setprofile(None)\n") == []
