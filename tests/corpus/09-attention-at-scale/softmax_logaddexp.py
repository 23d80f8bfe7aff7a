# Correct: the running statistics kept as one running log-sum-exp per row (torch.logaddexp of the
# blocks' logsumexp), then exp(x - lse): the same online softmax in log space.
# expect: full
# %% cell: online_softmax
def online_softmax(x, block_size):
    lse = torch.full_like(x[..., :1], float("-inf"))  # (..., 1): log of the running sum, max included
    for start in range(0, x.shape[-1], block_size):
        lse = torch.logaddexp(lse, x[..., start:start + block_size].logsumexp(dim=-1, keepdim=True))
    return torch.exp(x - lse)
