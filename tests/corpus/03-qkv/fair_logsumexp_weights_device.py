# Correct: projections stacked in a dict and unpacked; attention takes its weights as
# exp(scores - logsumexp(scores)) (torch.logsumexp, not a softmax function), hides what a boolean
# mask forbids with masked_fill(attn_mask.logical_not(), -inf), and makes the causal mask from two
# aranges on the query's device. A scratch cell picks the GPU when there is one
# (torch.cuda.is_available()) and times the function there. Full marks.
# expect: full
# %% cell: project_qkv
def project_qkv(x, w_q, w_k, w_v):
    projected = {name: x.matmul(w) for name, w in (("q", w_q), ("k", w_k), ("v", w_v))}
    return projected["q"], projected["k"], projected["v"]
# %% cell: scaled_dot_product_attention
def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    if scale is None:
        scale = query.shape[-1] ** -0.5
    scores = (query @ key.mT) * scale
    if is_causal:
        rows = torch.arange(query.shape[-2], device=query.device)
        cols = torch.arange(key.shape[-2], device=query.device)
        scores = scores.masked_fill(cols[None, :] > rows[:, None], float("-inf"))
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
    elif attn_mask is not None:
        scores = scores + attn_mask
    weights = torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True))
    return weights @ value, weights
# %% new cell after: test_sdpa_causal_scale
import time

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
q = k = v = torch.randn(8, 4, 128, 32, device=device)
start = time.perf_counter()
out, _ = scaled_dot_product_attention(q, k, v, is_causal=True)
if torch.cuda.is_available():
    torch.cuda.synchronize()
print(f"{time.perf_counter() - start:.4f} s on {device}")
