# Correct: softmax moves dim last, works in place on a clone (sub_, exp_, div_) and moves it
# back; its error message and a dictionary of labels hold the word "softmax" as data (issue 58:
# a word in a string is never a call). The scores with matmul and a division; the variance with
# torch.linalg.vecdot and var_mean; the scale with math.pow. Full marks.
# expect: full
# %% cell: softmax
LABELS = {"softmax": "probabilities", "log_softmax": "log-probabilities"}


def softmax(x, dim=-1):
    if not x.is_floating_point():
        raise TypeError("softmax needs a floating-point tensor, not " + str(x.dtype))
    moved = x.movedim(dim, -1).clone()  # (..., n)
    moved.sub_(moved.amax(dim=-1, keepdim=True))
    moved.exp_()
    moved.div_(moved.sum(dim=-1, keepdim=True))
    return moved.movedim(-1, dim)
# %% cell: scaled_scores
def scaled_scores(q, k):
    return torch.matmul(q, k.transpose(-1, -2)).div(math.sqrt(k.shape[-1]))
# %% cell: dot_product_variance
def dot_product_variance(q, k):
    dots = torch.linalg.vecdot(q, k, dim=-1)  # (n,)
    var, _mean = torch.var_mean(dots, correction=1)
    return var
# %% cell: score_scale
def score_scale(d_k, var_q=1.0, var_k=1.0):
    return math.pow(d_k * var_q * var_k, -0.5)
# %% new cell after: test_softmax
x = torch.randn(3, 5)
print(LABELS["softmax"], softmax(x, dim=0).sum(0))
print((softmax(x) - torch.softmax(x, dim=-1)).abs().max())
