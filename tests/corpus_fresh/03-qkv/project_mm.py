# Uses torch.mm, which takes 2-D matrices only: batched inputs (..., L, d_model) raise.
# expect: partial
# graded: project_qkv
# locus: torch.mm|mm(|2-d|leading dim|batch dim|matmul
# %% cell: project_qkv
def project_qkv(x, w_q, w_k, w_v):
    return torch.mm(x, w_q), torch.mm(x, w_k), torch.mm(x, w_v)
