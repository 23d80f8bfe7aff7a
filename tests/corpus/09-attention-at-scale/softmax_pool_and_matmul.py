# No blocks at all: the row's maximum by a max pooling as long as the row, its sum by a product
# with a vector of ones; right values.
# expect: partial
# hint: reduces a whole row at once
# %% cell: online_softmax
def online_softmax(x, block_size):
    N = x.shape[-1]
    flat = x.reshape(-1, 1, N)
    m = F.max_pool1d(flat, kernel_size=N).reshape(*x.shape[:-1], 1)
    e = torch.exp(x - m)
    total = e.reshape(-1, N) @ torch.ones(N, 1, dtype=x.dtype, device=x.device)
    return e / total.reshape(*x.shape[:-1], 1)
