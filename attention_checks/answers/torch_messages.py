"""PyTorch's own error messages, as a sealed report may quote them.

Once a grading kernel has run a hidden test, a report quotes nothing the student's code chose
freely (judging.Sealed). An error's message is such a choice when the student's code wrote it, but
when PyTorch raised it, it is one of PyTorch's message forms with only sizes, dtypes and devices
filled in, and it says what went wrong better than anything else ("raised RuntimeError" alone does
not). So a message that matches one of the forms below, whole, is quoted with its fixed words as
they are, its dtypes and devices from closed lists, and its numbers as the report quotes sizes (the
case's own numbers, others as "?"): whoever raised it, what it shows is a pick among a few.
"""
from __future__ import annotations

import re
from typing import Callable

_DTYPE = ("(?:Float|Double|Half|BFloat16|Long|Int|Short|Char|Byte|Bool|ComplexFloat|ComplexDouble|"
          "float|double|half|long|int|short|bool|c10::Half|c10::BFloat16|"
          "torch\\.(?:float64|float32|float16|bfloat16|int64|int32|int16|int8|uint8|bool|complex64|complex128))")
_DEVICE = "(?:cpu|meta|cuda(?::\\d)?)"
_PYTHON_TYPE = "(?:NoneType|list|tuple|int|float|bool|str|dict|numpy\\.ndarray)"
_KERNEL = "(?:bitwise_(?:not|and|or|xor)_(?:cpu|cuda)|softmax_lastdim_kernel_impl|log_softmax_lastdim_kernel_impl)"
_PLACEHOLDERS = {
    "{n}": "-?\\d+",
    "{shape}": "\\[(?:-?\\d+(?:, -?\\d+)*)?\\]",
    "{dtype}": _DTYPE,
    "{device}": _DEVICE,
    "{type}": _PYTHON_TYPE,
    "{kernel}": _KERNEL,
}

# The forms, as PyTorch 2.x words them (the messages a course's mistakes raise: cat, stack, matrix
# products, broadcasting, views, indexing, masks, dtypes, devices, top-k, sampling, einsum)
FORMS = [
    "Sizes of tensors must match except in dimension {n}. Expected size {n} but got size {n} for tensor number {n} "
    "in the list.",
    "stack expects each tensor to be equal size, but got {shape} at entry {n} and {shape} at entry {n}",
    "expected Tensor as element {n} in argument {n}, but got {type}",
    "mat1 and mat2 shapes cannot be multiplied ({n}x{n} and {n}x{n})",
    "Expected size for first two dimensions of batch2 tensor to be: {shape} but got: {shape}.",
    "batch1 must be a 3D tensor",
    "batch2 must be a 3D tensor",
    "Expected {n}-dimensional tensor, but got {n}-dimensional tensor for argument #{n} 'batch1' (while checking "
    "arguments for bmm)",
    "size mismatch, got input ({n}), mat ({n}x{n}), vec ({n})",
    "The size of tensor a ({n}) must match the size of tensor b ({n}) at non-singleton dimension {n}",
    "The expanded size of the tensor ({n}) must match the existing size ({n}) at non-singleton dimension {n}.  "
    "Target sizes: {shape}.  Tensor sizes: {shape}",
    "Dimension out of range (expected to be in range of [{n}, {n}], but got {n})",
    "shape '{shape}' is invalid for input of size {n}",
    "view size is not compatible with input tensor's size and stride (at least one dimension spans across two "
    "contiguous subspaces). Use .reshape(...) instead.",
    "index {n} is out of bounds for dimension {n} with size {n}",
    "index out of range in self",
    "selected index k out of range",
    "The shape of the mask {shape} at index {n} does not match the shape of the indexed tensor {shape} at index {n}",
    "masked_fill_ only supports boolean masks, but got mask with dtype {dtype}",
    "masked_fill only supports boolean masks, but got mask with dtype {dtype}",
    "expected m1 and m2 to have the same dtype, but got: {dtype} != {dtype}",
    "expected mat1 and mat2 to have the same dtype, but got: {dtype} != {dtype}",
    "expected scalar type {dtype} but found {dtype}",
    "Index put requires the source and destination dtypes match, got {dtype} for the destination and {dtype} for "
    "the source.",
    "result type {dtype} can't be cast to the desired output type {dtype}",
    '"{kernel}" not implemented for \'{dtype}\'',
    "~ (operator.invert) is only implemented on integer and Boolean-type tensors",
    "Tensor on device {device} is not on the expected device {device}!",
    "Expected all tensors to be on the same device, but found at least two devices, {device} and {device}!",
    "einsum(): the number of subscripts in the equation ({n}) does not match the number of dimensions ({n}) for "
    "operand {n} and no ellipsis was given",
    "probability tensor contains either `inf`, `nan` or element < 0",
    "invalid multinomial distribution (sum of probabilities <= 0)",
    "Boolean value of Tensor with more than one value is ambiguous",
    "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor",
    "unflatten: Provided sizes {shape} don't multiply up to the size of dim {n} ({n}) in the input tensor",
]


def _pattern(form: str) -> re.Pattern:
    parts = re.split("(" + "|".join(map(re.escape, _PLACEHOLDERS)) + ")", form)
    return re.compile("".join(_PLACEHOLDERS.get(part, re.escape(part)) for part in parts))


_PATTERNS = [_pattern(form) for form in FORMS]
_NUMBER = re.compile(r"-?\d+")
_FIXED_NUMBERS = re.compile(r"#\d+|\b\dD\b|cuda:\d|float(?:16|32|64)|bfloat16|u?int(?:8|16|32|64)|complex(?:64|128)")


def pytorch_message(message: str, size: Callable[[int], str]) -> str | None:
    """`message` quoted as one of PyTorch's forms, its numbers through `size` (a count or size
    the case may own, else "?"), or None when it is none of them."""
    if not any(pattern.fullmatch(message) for pattern in _PATTERNS):
        return None
    pieces, last = [], 0
    for fixed in _FIXED_NUMBERS.finditer(message):  # numbers that are words of the form, not sizes
        pieces.append(_sized(message[last:fixed.start()], size))
        pieces.append(fixed[0])
        last = fixed.end()
    return "".join(pieces) + _sized(message[last:], size)


def _sized(text: str, size: Callable[[int], str]) -> str:
    def one(number: re.Match) -> str:
        value = int(number[0])
        return ("-" if value < 0 else "") + size(abs(value))
    return _NUMBER.sub(one, text)
