# Correct: the scores by broadcasting every pair of tokens and summing over the features; the
# weights from a softmax class of the student's own (a callable object with __call__), scores
# scaled in place; prints while it works; a scratch cell sets the inline figures' format (%config),
# times it with %time and plots the weights with matplotlib. Full marks.
# expect: full
# %% cell: attention_scores
def attention_scores(x):
    # (B, L, 1, D) * (B, 1, L, D) -> (B, L, L, D), summed over the features
    return (x[:, :, None, :] * x[:, None, :, :]).sum(dim=-1)
# %% cell: simple_self_attention
class RowSoftmax:
    """A numerically stable softmax over one dimension."""

    def __init__(self, dim=-1):
        self.dim = dim

    def __call__(self, scores):
        e = (scores - scores.max(dim=self.dim, keepdim=True).values).exp()
        return e / e.sum(dim=self.dim, keepdim=True)


row_softmax = RowSoftmax(dim=-1)


def simple_self_attention(x):
    scores = torch.bmm(x, x.mT)
    scores.mul_(1.0 / math.sqrt(x.size(-1)))  # in place: the scores are ours
    weights = row_softmax(scores)
    print("weights:", tuple(weights.shape), weights.dtype)
    return torch.bmm(weights, x), weights
# %% new cell after: test_simple_self_attention
%config InlineBackend.figure_format = 'retina'
import matplotlib.pyplot as plt

%time out, w = simple_self_attention(torch.randn(2, 6, 8))
plt.imshow(w[0], cmap="viridis")
plt.colorbar()
plt.title("attention weights")
plt.show()
