# Hostile: torch.softmax passed through a helper in a cell that looks like setup, kept under
# another name, and called with torch function handling off (the in-kernel detector sees
# nothing): only the grader's source scan can tell, and softmax must lose its points.
# cli only: the in-kernel detector is switched off, so only the grader's scan catches it
# expect: partial
# hint: softmax calls torch.softmax
# %% new cell after: setup
def _keep(f):
    return f


_normalise = _keep(torch.softmax)
# %% cell: softmax
def softmax(x, dim=-1):
    with torch._C.DisableTorchFunction():
        return _normalise(x, dim)
