# A correct solution with torch.bmm, and the output taken from PyTorch's own attention
# (allowed in this chapter), the scaling applied to x before the product.
# expect: full
# %% cell: attention_scores
def attention_scores(x):
    return torch.bmm(x, x.permute(0, 2, 1))
# %% cell: simple_self_attention
import torch.nn.functional as F


def simple_self_attention(x):
    scaled = x / x.size(2) ** 0.25
    weights = F.softmax(torch.bmm(scaled, scaled.permute(0, 2, 1)), dim=2)
    output = F.scaled_dot_product_attention(x, x, x)
    return output, weights
