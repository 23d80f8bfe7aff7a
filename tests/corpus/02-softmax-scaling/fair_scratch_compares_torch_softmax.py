# Correct, and checks it in a scratch cell of their own: a loop comparing softmax with
# torch.softmax over every dim. The scratch cell is not the graded function: full marks.
# (Before issue 11 the grader charged softmax with "calls torch.softmax" for it: 0 of 6.)
# expect: full
# %% new cell after: test_softmax
for dim in (-1, 0, 1):
    x = torch.randn(4, 6, dtype=torch.float64)
    print(dim, torch.allclose(softmax(x, dim), torch.softmax(x, dim)))
print("log-probabilities agree:", torch.allclose(softmax(x).log(), torch.log_softmax(x, -1)))
