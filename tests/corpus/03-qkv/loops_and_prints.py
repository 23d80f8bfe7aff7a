# A correct solution with explicit Python loops and a hand-written softmax, that prints,
# warns and logs while it works (a correct solution earns full marks even so).
# expect: full
# %% cell: project_qkv
def project_qkv(x, w_q, w_k, w_v):
    print("projecting", tuple(x.shape))
    w = torch.cat([w_q, w_k, w_v], dim=-1)  # one matmul for the three projections
    qkv = x @ w
    d_k = w_q.shape[1]
    return qkv[..., :d_k], qkv[..., d_k:2 * d_k], qkv[..., 2 * d_k:]
# %% cell: scaled_dot_product_attention
import logging
import sys
import warnings


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    print("debug: query", tuple(query.shape))
    print("debug to stderr", file=sys.stderr)
    warnings.warn("this loop is slow")
    logging.getLogger("student").warning("logging a warning too")
    *lead, L, E = query.shape
    S, Ev = key.shape[-2], value.shape[-1]
    if scale is None:
        scale = 1.0 / math.sqrt(E)
    mask = None
    if attn_mask is not None:
        mask = attn_mask.expand(*lead, L, S).reshape(-1, L, S)
    q = query.reshape(-1, L, E)
    k = key.reshape(-1, S, E)
    v = value.reshape(-1, S, Ev)
    outputs, all_weights = [], []
    for b in range(q.shape[0]):
        rows_out, rows_w = [], []
        for i in range(L):
            s = (k[b] @ q[b, i]) * scale  # (S,)
            if is_causal:
                s = s.masked_fill(torch.arange(S, device=s.device) > i, float("-inf"))
            if mask is not None:
                s = s.masked_fill(~mask[b, i], float("-inf")) if mask.dtype == torch.bool else s + mask[b, i]
            e = torch.exp(s - s.max())
            w = e / e.sum()
            rows_w.append(w)
            rows_out.append(w @ v[b])
        outputs.append(torch.stack(rows_out))
        all_weights.append(torch.stack(rows_w))
    output = torch.stack(outputs).reshape(*lead, L, Ev)
    weights = torch.stack(all_weights).reshape(*lead, L, S)
    return output, weights
