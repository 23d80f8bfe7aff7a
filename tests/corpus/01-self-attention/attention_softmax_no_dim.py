# Calls the softmax without dim=: PyTorch warns and normalises over dim 0, the batch.
# expect: partial
# hint: pass dim=-1
# %% cell: simple_self_attention
import torch.nn.functional as F


def simple_self_attention(x):
    weights = F.softmax(x @ x.transpose(1, 2) / math.sqrt(x.shape[2]))
    return weights @ x, weights
