# Keeps the running maximum and sum in float32 whatever x's dtype.
# expect: partial
# graded: online_softmax
# locus: dtype|float32|float16|float64|precision
# %% cell: online_softmax
def online_softmax(x, block_size):
    """softmax(x, dim=-1) from a running maximum and a running sum, block by block.

    x: (..., N); returns (..., N), same dtype and device
    """
    n = x.size(-1)
    run_max = torch.full((*x.shape[:-1], 1), float("-inf"), dtype=torch.float32, device=x.device)  # (..., 1): the largest value so far
    run_sum = torch.zeros((*x.shape[:-1], 1), dtype=torch.float32, device=x.device)  # (..., 1): sum of exp(x - run_max) so far
    for lo in range(0, n, block_size):
        chunk = x[..., lo:lo + block_size]  # (..., b); the last chunk may be shorter
        new_max = torch.maximum(run_max, chunk.max(dim=-1, keepdim=True).values)
        run_sum = run_sum * (run_max - new_max).exp() + (chunk - new_max).exp().sum(dim=-1, keepdim=True)
        run_max = new_max
    return (x - run_max).exp() / run_sum
