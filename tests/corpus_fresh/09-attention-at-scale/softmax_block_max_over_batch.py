# Takes each block's maximum over dim 0 instead of over the block's entries (dim -1).
# expect: partial
# graded: online_softmax
# locus: dim=-1|along the row|each row's|every row's|over dim 0|across rows|other rows
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
        new_max = torch.maximum(run_max, chunk.amax(dim=(0, -1), keepdim=True))
        run_sum = run_sum * (run_max - new_max).exp() + (chunk - new_max).exp().sum(dim=-1, keepdim=True)
        run_max = new_max
    return (x - run_max).exp() / run_sum
