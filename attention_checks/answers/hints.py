"""Hints that need no list of known mistakes: for a case whose code raised, for an output whose
failing pattern is characteristic (NaN rows, a constant factor, a transpose, values in other
places), and for an output of the wrong dtype or device.

They are read off what the judge has: the exception's type, message and line, the case's
inputs (the contract: their shapes, which are None, which masks are float) and the outputs.
A check's own reading of a crash (``crashes.CRASHES``) comes first; these are the fallback that names the mechanism.
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Sequence

import torch

from ..record import device_name


class Claim(str):
    """A hint that says what caused the outputs, with what the judge checks across the failing cases
    before it is shown (issue 59: every diagnosis is a claim with a check): ``mistakes``, the known
    mistakes it names (each refuted by a failing case where that mistake gives the reference's
    outputs: the mistake alone would pass there), or ``factor``, the constant a pattern multiplies
    the reference by (shown only if one factor fits every failing case)."""

    mistakes: tuple[str, ...] = ()
    factor: float | None = None

    def __new__(cls, text: str, mistakes: Iterable[str] = (), factor: float | None = None):
        claim = super().__new__(cls, text)
        claim.mistakes, claim.factor = tuple(mistakes), factor
        return claim

    def worded(self, text: str) -> "Claim":
        """The same claim in other words (as a report quotes it)."""
        return Claim(text, self.mistakes, self.factor)


def _listing(names: list[str]) -> str:
    return " and ".join(f"`{n}`" for n in names)


def split_error(error: str) -> tuple[str, str]:
    """(first line "raised Type: message", the student's line it raised at or "") of a probe's error."""
    first, _, rest = error.partition("\n")
    return first, rest.split("at:", 1)[1].strip() if "at:" in rest else ""


_LAYER = re.compile(r"(^|\.)layers\.\d+\.")  # a stack's layer in a state dict's key: "layers.0." or "encoder.layers.1."


def _weight_names(state: Mapping[str, Any], shown: int = 12) -> str:
    """The parameter names of a state dict the test loads, a stack's layers written once as layers.<i>."""
    names = list(dict.fromkeys(_LAYER.sub(r"\1layers.<i>.", key) for key in state))
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _weights_hint(first: str, state: Mapping[str, Any]) -> str:
    """Why the test's weights (`state`) do not load into the student's module, from the error's
    first line: no parameters at all, parameters of other names, or of other shapes."""
    names = f" ({_weight_names(state)})" if state else ""
    stack = any(_LAYER.search(key) for key in state)
    if stack and ("has no parameters" in first or re.search(r"lacks (\S*\.)?layers\.\d", first)):
        return (f"Your module holds none of its layers' weights{names}: keep the layers in an nn.ModuleList; "
                "modules kept in a Python list are invisible to PyTorch.")
    if "has no parameters" in first:
        return (f"Your module has no parameters, so the test cannot load its weights{names} into it: weights must be "
                "nn.Parameter attributes (or those of submodules such as nn.Linear); a plain tensor attribute is "
                "invisible to PyTorch.")
    if "do not fit" in first:
        return (f"The test's weights{names} do not fit the shapes of your module's: give each parameter the shape of "
                "PyTorch's (nn.Linear(n_in, n_out) holds a weight of shape (n_out, n_in)).")
    return (f"The test loads PyTorch's weights into your module{names}: name the submodules and parameters as these "
            "weights are named (nn.Linear or nn.LayerNorm submodules, nn.Parameter attributes, nn.ModuleList for a "
            "list of layers).")


def crash_hints(error: str, named: Mapping[str, Any], state: Mapping[str, Any] | None = None) -> list[str]:
    """Hints for a case whose code raised, from the exception and the case's inputs (`named`:
    argument name -> value as the case passes them; an optional argument it leaves out is None;
    `state`: the weights the test loads into the student's module, if it does)."""
    first, line = split_error(error)
    words = set(re.findall(r"[A-Za-z_]\w*", line))
    tensors = {n: v for n, v in named.items() if isinstance(v, torch.Tensor)}
    masks = [n for n in tensors if "mask" in n]
    hints = []

    if "NoneType" in first:
        # every optional tensor argument of the course is a mask: one the line uses but the case leaves None
        absent = sorted(w for w in words if (w in named and named[w] is None) or (w.endswith("mask") and w not in named))
        if absent:
            hints.append(f"{_listing(absent)} may be None (here it is): ask `if {absent[0]} is not None:` "
                         "before using it.")
        elif not line and any(v is None for v in named.values()):  # no line to read the name from
            absent = [n for n, v in named.items() if v is None]
            hints.append(f"{_listing(absent)} may be None (here it is): ask `if {absent[0]} is not None:` "
                         "before using it.")
        elif not line:  # (a notebook's cell source is not always at hand)
            hints.append("An argument that defaults to None may be None, as in this case: ask `if ... is not None:` "
                         "before using it.")
    m = re.search(r"einsum\(\): the number of subscripts in the equation \((\d+)\) does not match the number "
                  r"of dimensions \((\d+)\)", first)
    if m:
        hints.append(f"Your einsum subscripts name {m[1]} dimensions, but the tensor has {m[2]}: write the leading "
                     "dimensions as `...`, as in '...ld,...sd->...ls'.")
    # masked_fill, ~, | or & on a float mask ("bitwise_or_cpu" not implemented for 'Float')
    if re.search(r"only supports boolean masks|operator\.invert|bitwise_not|"
                 r"bitwise_\w+\" not implemented for '(Float|Double|Half|BFloat16)'", first):
        floats = [n for n in masks if tensors[n].is_floating_point()]
        if floats:
            what = "a float mask" if len(floats) == 1 else "float masks"
            hints.append(f"{_listing(floats)} may be {what}, as here: a float mask is added to the scores "
                         "(scores + mask); only a boolean mask goes through masked_fill, ~, | or &.")
        else:
            hints.append("masked_fill takes a boolean mask (True where to fill) and ~ inverts booleans only: make "
                         "masks with comparisons and logical operators (|, &, ~), not 0/1 numbers.")
    # an operator given what max, min, sort or topk along a dim return: a named pair, which Python names in its message
    m = re.search(r"unsupported operand type\(s\) for .*'torch\.return_types\.(max|min|sort|topk|kthvalue|median|mode)'",
                  first)
    if m:
        alone = f" (or `a{m[1]}(dim=...)`, which gives the values alone)" if m[1] in ("max", "min") else ""
        hints.append(f"`.{m[1]}(dim=...)` gives a pair (values, indices), a `torch.return_types.{m[1]}`, not a tensor: "
                     f"take its `.values`{alone}.")
    m = re.search(r"(too many|not enough) values to unpack \(expected (\d+)", first)
    if m and tensors:
        hints.append(f"You unpack a shape into {m[2]} names, but this case's inputs have other numbers of dimensions: "
                     "take sizes from the end (x.size(-1), x.shape[-2:]) so that any number of leading dimensions "
                     "works.")
    if "view size is not compatible with input tensor's size and stride" in first:
        hints.append("view cannot merge dimensions that a transpose has made non-contiguous: use reshape (or "
                     ".contiguous().view(...)) after a transpose.")
    m = re.search(r"shape '\[([-\d, ]+)\]' is invalid for input of size (\d+)", first)
    if m:
        hints.append("Your view/reshape asks for a shape that does not hold the tensor's elements: compute the sizes "
                     "from the input's shape (x.shape) instead of assuming them.")
    m = re.search(r"The size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton", first)
    if m:
        align = (" A mask lines up with the last axes of the scores (..., L, S): give it axes of size 1 where it "
                 "has none (a key mask (B, S) is (B, 1, S), or (B, 1, 1, S) with heads).") \
            if masks and (not line or "mask" in line) else ""
        hints.append(f"Two tensors do not broadcast: the sizes of an axis must be equal, or one of them 1.{align}")
    m = re.search(r"Dimension out of range \(expected to be in range of \[(-?\d+), (-?\d+)\], but got (-?\d+)\)", first)
    if m:
        hints.append("This case's inputs have another number of dimensions than your code assumes: count "
                     "dimensions from the end (-1, -2), which works for any number of leading dimensions.")
    if re.search(r"WeightsDoNotFit|weights do not (fit|load)|has no parameters, so the weights", first):
        hints.append(_weights_hint(first, state or {}))
    if "EvalModeError" in first or "dropout must be off in eval mode" in first:
        hints.append("Dropout must be off in eval mode (after module.eval()): use nn.Dropout modules, or "
                     "F.dropout(x, p, training=self.training), never F.dropout(x, p) alone.")
    m = re.search(r"Expected key_padded_mask\.shape\[1\] to be (\d+), but got (\d+)", first)
    if m:
        hints.append(f"A key padding mask has one entry per key of its attention ({m[1]} keys here, the mask has "
                     f"{m[2]}): either the mask belongs to other keys, or this attention's keys are not the tensor "
                     "you meant (check which argument is the query and which the key).")
    m = re.search(r"The shape of the 2D attn_mask is torch\.Size\(\[(\d+), (\d+)\]\), but should be \((\d+), (\d+)\)",
                  first)
    if m:
        hints.append(f"An attn_mask is (queries, keys) of its attention ({m[3]} x {m[4]} here, yours is {m[1]} x "
                     f"{m[2]}): either the mask is not this attention's, or its query and keys are not the tensors "
                     "you meant.")
    if re.search(r"mat1 and mat2 shapes cannot be multiplied|Expected size for first two dimensions of batch2", first):
        # "which axes you transpose" only where the line transposes something (else it is a guess)
        transposes = re.search(r"\.(transpose|permute|mT|T)\b|\.t\(\)|swapaxes", line) is not None
        hints.append("The shapes of a matrix product do not fit: the last axis of the left operand meets the "
                     "second-to-last of the right one; " + ("check which axes you transpose." if transposes else
                                                           "check which tensors, of which shapes, this line "
                                                           "multiplies."))
    return hints


# What PyTorch raises when a CPU tensor with dimensions meets a cuda one, or (probe.on_meta) a meta
# one (a 0-dim CPU scalar is allowed on both); other meta failures (copying data out, a value
# tensor of masked_fill that CUDA would take) are no device bug.
_DEVICE = r"(cpu|meta|cuda(:\d+)?)"
_MIXING = re.compile(rf"Tensor on device {_DEVICE} is not on the expected device {_DEVICE}!"
                     rf"|Expected all tensors to be on the same device.*\b{_DEVICE}\b.*\b{_DEVICE}\b"
                     rf"|Input and parameter tensors are not at the same device, found input tensor at {_DEVICE}"
                     r"|expected \w+ and \w+ to be on the same device")  # masked_fill's "self and mask"
# A call that creates a tensor, as a student writes it; the hint quotes it when it names no device.
_FACTORY = re.compile(r"\btorch\.(ones|zeros|full|empty|eye|arange|tensor|as_tensor|rand|randn|randint|linspace)\(")


def device_bug(error: str | None) -> bool:
    """Whether a case raised (on a GPU), or its meta run (probe.on_meta) raised, two devices mixed."""
    return bool(error) and _MIXING.search(split_error(error)[0]) is not None


def kept_from_an_earlier_call(error: str | None, device: str) -> bool:
    """Whether a case whose inputs were on ``device`` (not meta) raised two devices mixed, one of
    them meta: its code met a tensor of an earlier meta run (probe.on_meta, which follows the real
    runs), so it keeps tensors from one call to the next (observed, not guessed)."""
    if not device_bug(error) or device == "meta":
        return False
    return re.search(r"\bmeta\b", split_error(error)[0]) is not None


KEPT_STATE_HINT = ("Your code keeps tensors from one call to the next: this case met a tensor that an earlier "
                   "case's call left behind. State kept in a class attribute (`keys = []` in the class body), a "
                   "global or a mutable default argument is shared by every object and call; make it in "
                   "__init__ (self.keys = None) or inside the function.")


def _call_at(line: str, start: int) -> str:
    """The call that starts at line[start:] up to its closing parenthesis."""
    depth = 0
    for i in range(line.index("(", start), len(line)):
        depth += {"(": 1, ")": -1}.get(line[i], 0)
        if depth == 0:
            return line[start:i + 1]
    return line[start:]


def device_hints(error: str, named: Mapping[str, Any], kind: str) -> list[str]:
    """The hint for a case that crashes on a GPU: the tensor made on the CPU and how to make it
    on the inputs' device (`named`: the case's arguments; `kind`: "function" or "class")."""
    _, line = split_error(error)
    x = next((n for n, v in named.items() if isinstance(v, torch.Tensor) and v.is_floating_point()),
             next((n for n, v in named.items() if isinstance(v, torch.Tensor)), "x"))
    calls = [c for c in (_call_at(line, m.start()) for m in _FACTORY.finditer(line)) if "device" not in c]
    here = "this line" if line else "your code"
    attribute = kind == "class" and not calls  # a tensor made elsewhere may be an attribute of the module
    if calls:
        made = (f"`{calls[0]}` creates a tensor on the CPU, and {here} mixes it with the inputs, which are on cuda "
                "there")
    else:
        made = (f"{here} mixes the inputs, which are on cuda there, with a tensor made on the CPU: one created "
                "without device= (torch.ones, torch.arange, torch.tensor, ...)"
                + (", or a plain tensor attribute of your module (.to(device) moves only parameters and buffers)"
                   if attribute else ""))
    return [f"On a GPU this crashes: {made}. Create tensors on the inputs' device: device={x}.device (or "
            f"torch.ones_like({x}), {x}.new_ones(...))" + ("; keep a module's tensors with register_buffer."
                                                           if attribute else ".")]


def _rows_of_padded_queries(nan_rows: torch.Tensor, masks: Mapping[str, Any]) -> bool:
    """Whether the NaN rows (B, ..., L) are exactly the positions a key padding mask (B, L) marks: the
    mask hides the padded queries (rows) instead of the padded keys."""
    for name, mask in masks.items():
        if "padding" in name and isinstance(mask, torch.Tensor) and mask.dtype == torch.bool and mask.dim() == 2 \
                and nan_rows.dim() >= 2 and nan_rows.shape[0] == mask.shape[0] and nan_rows.shape[-1] == mask.shape[1]:
            rows = nan_rows.reshape(mask.shape[0], -1, mask.shape[1])
            if mask.any() and bool((rows == mask.cpu()[:, None, :]).all()):
                return True
    return False


def pattern_hints(name: str, got: Any, expected: Any, masks: Mapping[str, Any]) -> list[str]:
    """What a wrong output's pattern says when no known mistake explains it (`masks`: the case's
    mask arguments, name -> tensor)."""
    if not (isinstance(got, torch.Tensor) and isinstance(expected, torch.Tensor)) or got.is_complex():
        return []
    if tuple(got.shape) != tuple(expected.shape) or not expected.is_floating_point():
        return []
    got, expected = got.detach().to("cpu", torch.float64), expected.to(torch.float64)
    if not expected.isfinite().all():
        return []
    nan = got.isnan()
    if nan.any():
        if got.dim() and bool((nan.any(-1) == nan.all(-1)).all()):  # whole rows, nothing else
            if _rows_of_padded_queries(nan.all(-1), masks):
                why = ("they are the padded positions, so your key padding mask hides the padded QUERIES (rows) "
                       "instead of the padded keys (columns): a key mask (B, S) lines up with the last axis of the "
                       "scores: view it as (B, 1, S), or (B, 1, 1, S) with heads")
            elif masks:
                why = ("your masking hides every key of those rows: an inverted mask, a float mask used as a "
                       "boolean, or a mask along the wrong axis")
            else:
                why = "a row of -inf, or exp overflowing to inf/inf"
            # no name and no count (the case's lines show them): the same words for every output and case,
            # so that a later case says "as above"
            return [f"Rows of NaN where the reference has numbers: a softmax over a row whose scores are all -inf "
                    f"gives 0/0; here {why}."]
        return []
    if not got.isfinite().all():
        return []

    def same(a: torch.Tensor, b: torch.Tensor) -> bool:
        return torch.allclose(a, b, rtol=1e-4, atol=1e-6)

    big = expected.abs() > 1e-3 * expected.abs().max()
    if int(big.sum()) >= 2:
        c = (got[big] / expected[big]).median().item()
        if c != 0 and abs(c - 1) > 1e-3 and same(got, expected * c):
            return [Claim(f"{name} is the reference times {c:.4g} everywhere: a constant factor is missing or extra "
                          "(a scale such as 1/sqrt(d), or a sum where a mean is needed).", factor=c)]
    # a pattern is a claim only where it tells the output from the reference: a symmetric reference
    # (scores of zero, a drift that should be 0) is its own transpose, and any noise "matches" it
    swapped = expected.transpose(-2, -1) if expected.dim() >= 2 and expected.size(-1) == expected.size(-2) else None
    if swapped is not None and not same(swapped, expected) and same(got, swapped):
        return [f"{name} is the reference with its last two axes swapped: transpose it, or swap the operands of "
                "the product that makes it."]
    if got.numel() > 1 and not same(got, expected) and same(got.flatten().sort().values,
                                                             expected.flatten().sort().values):
        return [f"{name} holds the reference's values in other places: axes are mixed up (a view or reshape where "
                "a transpose or permute is needed, or an operation along the wrong dim)."]
    return []


def structure_hints(got: Mapping[str, Any], want: Mapping[str, torch.dtype], device: str,
                    inputs_dtype: torch.dtype | None = None) -> list[str]:
    """Hints for outputs (name -> tensor of the right shape) of the wrong dtype (`want`) or device
    (`inputs_dtype`: the dtype of the case's inputs, which float outputs have)."""
    hints = []
    dtypes = [n for n, t in got.items() if t.dtype != want[n]]
    bools = [n for n in dtypes if want[n] == torch.bool]
    # integer outputs (token ids) of a fixed dtype, not the inputs' (sample_next's logits are float)
    ids = [n for n in dtypes if want[n] != torch.bool and not want[n].is_floating_point and want[n] != inputs_dtype]
    floats = [n for n in dtypes if want[n] != torch.bool and n not in ids]
    if ids:
        hints.append(f"{' and '.join(ids)} must be token ids of dtype {str(want[ids[0]]).removeprefix('torch.')}, "
                     "as the contract says: argmax, topk and multinomial give int64 (torch.long); a .int(), "
                     "dtype=torch.int32 or a float tensor of ids changes it (cast with .long()).")
    if bools:
        hints.append(f"Return {' and '.join(bools)} as a boolean tensor (torch.bool): comparisons such as `==` or "
                     "`>` and torch.ones(..., dtype=torch.bool) give one; .int(), .long() or .float() turn it into "
                     "numbers.")
    if floats:
        hints.append(f"{' and '.join(floats)} must have the inputs' dtype "
                     f"({str(want[floats[0]]).removeprefix('torch.')}): a tensor you create inside (torch.tensor, "
                     "torch.zeros, torch.arange, a mask turned into numbers) or a .float()/.double() changes it; "
                     "create tensors with dtype=x.dtype, or cast the result back with .to(x.dtype).")
    elsewhere = [n for n, t in got.items() if device_name(t) != device]
    if elsewhere:
        hints.append(f"{' and '.join(elsewhere)} {'is' if len(elsewhere) == 1 else 'are'} on "
                     f"{device_name(got[elsewhere[0]])}, the inputs on {device}: create new tensors on the "
                     "input's device (device=x.device, or torch.zeros_like(x)).")
    return hints


def mask_contract_hints(error: str, named: Mapping[str, Any], optional: Sequence[str], key_view: str) -> list[str]:
    """A check's own reading of a crash with masks: which of the `optional` masks may be None, and how
    a key_padding_mask lines up with the scores (`key_view`, e.g. "(B, 1, 1, S)")."""
    first, line = split_error(error)
    hints = []
    if "NoneType" in first:
        absent = [n for n in optional if named.get(n) is None and (not line or n in line)]
        if absent:
            hints.append(f"{' and '.join(absent)} may be None (as in this case): ask `if {absent[0]} is not None:` "
                         "before using it.")
    if "must match the size of tensor" in first and isinstance(named.get("key_padding_mask"), torch.Tensor) \
            and (not line or "mask" in line or "padding" in line):
        hints.append(f"key_padding_mask (B, S) marks keys, the last axis of the scores: view it as {key_view}, "
                     "so that it broadcasts over the queries (and the heads).")
    return hints
