# Correct; the setup cell was copied and pasted (same source, a new cell id) below the first
# test and run again. A copy of the course's own cell is not tampering with the checks.
# (Before issue 11: 0 for the whole assignment, "calls the course's own checks".)
# expect: full
# %% copy of: setup after: test_softmax
# %% cell: scaled_scores
def scaled_scores(q, k):
    d_k = q.shape[-1]
    scores = torch.einsum("...ld,...sd->...ls", q, k)  # (..., L, S)
    return scores * d_k**-0.5
