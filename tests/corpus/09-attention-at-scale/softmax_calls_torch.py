# Calls PyTorch's softmax on the whole row.
# expect: partial
# hint: which this exercise asks you to write yourself
# %% cell: online_softmax
def online_softmax(x, block_size):
    return torch.softmax(x, dim=-1)
