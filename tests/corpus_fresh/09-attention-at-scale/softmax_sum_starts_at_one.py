# Starts the running sum at one instead of zero.
# expect: partial
# graded: online_softmax
# locus: running sum|starts at|initial value|from 0|from zero|new_zeros|sum starts
# %% cell: online_softmax
def online_softmax(x, block_size):
    """softmax(x, dim=-1) from a running maximum and a running sum, block by block.

    x: (..., N); returns (..., N), same dtype and device
    """
    n = x.size(-1)
    run_max = x.new_full((*x.shape[:-1], 1), float("-inf"))  # (..., 1): the largest value so far
    run_sum = x.new_ones((*x.shape[:-1], 1))  # (..., 1): sum of exp(x - run_max) so far
    for lo in range(0, n, block_size):
        chunk = x[..., lo:lo + block_size]  # (..., b); the last chunk may be shorter
        new_max = torch.maximum(run_max, chunk.max(dim=-1, keepdim=True).values)
        run_sum = run_sum * (run_max - new_max).exp() + (chunk - new_max).exp().sum(dim=-1, keepdim=True)
        run_max = new_max
    return (x - run_max).exp() / run_sum
