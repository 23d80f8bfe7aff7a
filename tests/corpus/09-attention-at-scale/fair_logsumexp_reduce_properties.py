# Correct: online_softmax folds its blocks with functools.reduce over (maximum, sum) pairs;
# flash_attention keeps a running log-sum-exp per query (torch.logsumexp of a tile, logaddexp to
# merge) instead of a maximum and a sum; KVCache keeps lists of chunks and shows keys and values
# as properties (None while empty); GroupedQueryAttention takes the softmax in float32 for half
# inputs only and casts back. Full marks.
# expect: full
# %% cell: online_softmax
from functools import reduce


def online_softmax(x, block_size):
    def fold(state, block):
        m, s = state
        m_new = torch.maximum(m, block.amax(dim=-1, keepdim=True))
        return m_new, s * (m - m_new).exp() + (block - m_new).exp().sum(dim=-1, keepdim=True)

    start = (torch.full_like(x[..., :1], -math.inf), torch.zeros_like(x[..., :1]))
    m, s = reduce(fold, torch.split(x, block_size, dim=-1), start)
    return (x - m).exp() / s
# %% cell: flash_attention
def flash_attention(q, k, v, block_size, causal=False):
    L, S = q.shape[-2], k.shape[-2]
    scale = 1 / math.sqrt(q.shape[-1])
    out = q.new_zeros(*q.shape[:-1], v.shape[-1])
    for i in range(0, L, block_size):
        qi = q[..., i:i + block_size, :]
        n = qi.shape[-2]
        lse = qi.new_full((*qi.shape[:-1], 1), -math.inf)  # log of the running sum of exp(scores)
        acc = qi.new_zeros(*qi.shape[:-1], v.shape[-1])  # normalised by exp(lse) all along
        for j in range(0, min(S, i + n) if causal else S, block_size):
            s = (qi @ k[..., j:j + block_size, :].transpose(-2, -1)) * scale
            if causal:
                later = torch.arange(j, j + s.shape[-1], device=q.device) > torch.arange(i, i + n, device=q.device)[:, None]
                s = s.masked_fill(later, -math.inf)
            lse_new = torch.logaddexp(lse, torch.logsumexp(s, dim=-1, keepdim=True))
            acc = acc * (lse - lse_new).exp() + (s - lse_new).exp() @ v[..., j:j + block_size, :]
            lse = lse_new
        out[..., i:i + n, :] = acc
    return out
# %% cell: grouped_query_attention
class KVCache:
    def __init__(self):
        self.key_chunks, self.value_chunks = [], []

    @property
    def keys(self):
        return torch.cat(self.key_chunks, dim=-2) if self.key_chunks else None

    @property
    def values(self):
        return torch.cat(self.value_chunks, dim=-2) if self.value_chunks else None

    def __len__(self):
        return sum(chunk.shape[-2] for chunk in self.key_chunks)

    def update(self, k, v):
        self.key_chunks.append(k)
        self.value_chunks.append(v)
        return self.keys, self.values


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, d_model // num_heads
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.w_v = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.w_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, cache=None):
        B, T, E = x.shape
        heads = lambda t, h: t.reshape(B, T, h, self.head_dim).transpose(1, 2)  # noqa: E731
        q, k, v = heads(self.w_q(x), self.num_heads), heads(self.w_k(x), self.num_kv_heads), heads(
            self.w_v(x), self.num_kv_heads)
        first = len(cache) if cache is not None else 0
        if cache is not None:
            k, v = cache.update(k, v)
        repeats = self.num_heads // self.num_kv_heads
        k, v = k.repeat_interleave(repeats, dim=1), v.repeat_interleave(repeats, dim=1)
        scores = torch.matmul(q, k.transpose(2, 3)) * self.head_dim**-0.5
        ahead = torch.arange(k.shape[2], device=x.device) > torch.arange(first, first + T, device=x.device)[:, None]
        scores = scores.masked_fill(ahead, float("-inf"))
        half = scores.dtype in (torch.float16, torch.bfloat16)
        weights = F.softmax(scores, dim=-1, dtype=torch.float32 if half else None).to(q.dtype)
        return self.w_o(torch.matmul(weights, v).transpose(1, 2).reshape(B, T, E))
