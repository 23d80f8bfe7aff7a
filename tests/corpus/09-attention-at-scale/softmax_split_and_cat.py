# Correct: blocks from x.split, the running maximum from torch.max's namedtuple, and the output
# written block by block and concatenated.
# expect: full
# %% cell: online_softmax
def online_softmax(x, block_size):
    blocks = x.split(block_size, dim=-1)
    running_max, running_sum = None, None
    for block in blocks:
        block_max = torch.max(block, dim=-1, keepdim=True).values
        if running_max is None:
            running_max, running_sum = block_max, torch.exp(block - block_max).sum(-1, keepdim=True)
            continue
        new_max = torch.max(running_max, block_max)
        running_sum = running_sum * torch.exp(running_max - new_max) + torch.exp(block - new_max).sum(-1, keepdim=True)
        running_max = new_max
    return torch.cat([torch.exp(block - running_max) / running_sum for block in blocks], dim=-1)
