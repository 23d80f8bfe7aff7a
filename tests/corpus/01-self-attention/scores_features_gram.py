# Transposes the wrong factor: xᵀ x compares features, (B, D, D).
# expect: partial
# hint: of shape (B, L, L)
# %% cell: attention_scores
def attention_scores(x):
    return x.transpose(1, 2) @ x
