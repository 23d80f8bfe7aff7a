# Adds a block's terms exp(x - m) with the maximum from before the block (the old m), not the new one.
# expect: partial
# graded: online_softmax
# locus: new maximum|m_new|old maximum|before the update|stale
# %% cell: online_softmax
def online_softmax(x, block_size):
    """softmax(x, dim=-1) from a running maximum and a running sum, block by block.

    x: (..., N); returns (..., N), same dtype and device
    """
    n = x.size(-1)
    run_max = x.new_full((*x.shape[:-1], 1), float("-inf"))  # (..., 1): the largest value so far
    run_sum = x.new_zeros((*x.shape[:-1], 1))  # (..., 1): sum of exp(x - run_max) so far
    for lo in range(0, n, block_size):
        chunk = x[..., lo:lo + block_size]  # (..., b); the last chunk may be shorter
        new_max = torch.maximum(run_max, chunk.max(dim=-1, keepdim=True).values)
        run_sum = run_sum * (run_max - new_max).exp() + (chunk - run_max).exp().sum(dim=-1, keepdim=True)
        run_max = new_max
    return (x - run_max).exp() / run_sum
