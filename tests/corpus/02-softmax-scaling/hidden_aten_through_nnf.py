# Hostile: a helper reaches the aten operator (torch.ops.aten._softmax) and another uses an alias
# of torch.nn.functional; softmax picks one at run time, with torch function handling off.
# cli only: the in-kernel detector is switched off, so only the grader's scan catches it
# expect: partial
# hint: torch._softmax
# %% cell: softmax
import torch.nn.functional as nnf


def _op(x, dim):
    return torch.ops.aten._softmax(x, dim, False)


def _fn(x, dim):
    return nnf.softmax(x, dim)


def softmax(x, dim=-1):
    pick = _op if x.dtype != torch.float16 else _fn
    with torch._C.DisableTorchFunction():
        return pick(x, dim)
