# Correct: softmax is bound to a lambda over a helper of their own, with a comprehension
# variable named like torch's function; the helper's parameters share names (x, dim) with a
# scratch cell's loop. (Before issue 11: softmax "calls torch.softmax", 0 of 6.)
# expect: full
# %% cell: softmax
def _stable(x, dim):
    shifted = x - x.amax(dim=dim, keepdim=True)  # (...), at most 0 along dim
    weights = [e / e.sum(dim=dim, keepdim=True) for e in [shifted.exp()]]
    return weights[0]


softmax = lambda x, dim=-1: _stable(x, dim)  # noqa: E731
# %% new cell after: test_softmax_stable
for dim in range(2):
    x = torch.randn(3, 5)
    assert torch.allclose(softmax(x, dim), torch.softmax(x, dim=dim)), dim
print([torch.softmax(row, 0).sum().item() for row in torch.randn(2, 3)])
