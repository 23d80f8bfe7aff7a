# Takes the exp of PyTorch's log_softmax, imported under an alias: forbidden, so softmax earns
# no points (the other functions still do).
# expect: partial
# hint: Doing so earns no points
# %% cell: softmax
from torch.nn.functional import log_softmax as stable_log


def softmax(x, dim=-1):
    return stable_log(x, dim=dim).exp()
