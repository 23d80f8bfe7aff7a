# Hostile: softmax is a functools.partial of torch.softmax, wrapped so that the call runs with
# torch function handling off (hidden from the in-kernel detector).
# cli only: the in-kernel detector is switched off, so only the grader's scan catches it
# expect: partial
# hint: softmax calls torch.softmax
# %% cell: softmax
import functools

_hidden = functools.partial(torch.softmax)


def _quietly(f):
    def run(*args, **kwargs):
        with torch._C.DisableTorchFunction():
            return f(*args, **kwargs)
    return run


softmax = _quietly(_hidden)
