# Forgets diagonal=1: also hides each query's own key.
# expect: partial
# hint: also hides the diagonal
# %% cell: causal_mask
def causal_mask(size):
    return torch.triu(torch.ones(size, size, dtype=torch.bool))
