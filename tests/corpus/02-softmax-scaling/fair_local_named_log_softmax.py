# Correct: softmax computes the log-probabilities first, in a local variable named log_softmax,
# then takes their exp; a helper of its own is named logsumexp_along. Locals are not torch's
# functions: full marks. (Before issue 11: 0 for softmax, "calls torch.log_softmax".)
# expect: full
# %% cell: softmax
def logsumexp_along(x, dim):
    biggest = x.amax(dim=dim, keepdim=True)  # (...), 1 along dim
    biggest = torch.where(torch.isfinite(biggest), biggest, torch.zeros_like(biggest))
    return biggest + (x - biggest).exp().sum(dim=dim, keepdim=True).log()


def softmax(x, dim=-1):
    log_softmax = x - logsumexp_along(x, dim)  # (...), log-probabilities, never above 0
    return log_softmax.exp()
