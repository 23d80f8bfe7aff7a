# Transposes the weights as for nn.Linear: fails for non-square weights, wrong for square ones.
# expect: partial
# hint: with no transpose
# %% cell: project_qkv
def project_qkv(x, w_q, w_k, w_v):
    return x @ w_q.T, x @ w_k.T, x @ w_v.T
