# Right values, but the scores are written into a tensor made with torch.empty(...) and no device=:
# on a GPU the result stays on the CPU while the input is on cuda (a copy from cuda into a CPU tensor
# is allowed, nothing crashes). The grader's meta run takes such a copy for the device bug it is.
# expect: partial
# hint: On a GPU this crashes
# %% cell: attention_scores
def attention_scores(x):
    scores = torch.empty(*x.shape[:-1], x.size(-2), dtype=x.dtype)  # (..., L, L)
    scores[...] = x @ x.transpose(-2, -1)
    return scores
