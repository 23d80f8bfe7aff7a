# Hostile: the name of torch's softmax is built from pieces ("soft" + "max") and looked up with
# getattr on an alias of torch, with torch function handling off.
# cli only: the in-kernel detector is switched off, so only the grader's scan catches it
# expect: partial
# hint: softmax calls torch.softmax
# %% cell: softmax
import torch as t

_name = "soft" + "max"


def softmax(x, dim=-1):
    with t._C.DisableTorchFunction():
        return getattr(t, _name)(x, dim)
