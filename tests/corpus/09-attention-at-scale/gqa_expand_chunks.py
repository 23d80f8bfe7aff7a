# Correct: the cache keeps a list of chunks and concatenates them when asked; the heads are shared
# with expand + reshape (the same order as repeat_interleave), and the causal mask comes from
# triu with an offset, aligned with the end of the keys.
# expect: full
# %% cell: grouped_query_attention
class KVCache:
    def __init__(self):
        self.keys = None
        self.values = None
        self._chunks = []

    def __len__(self):
        return sum(k.shape[-2] for k, _ in self._chunks)

    def update(self, k, v):
        self._chunks.append((k, v))
        self.keys = torch.cat([k for k, _ in self._chunks], dim=-2)
        self.values = torch.cat([v for _, v in self._chunks], dim=-2)
        return self.keys, self.values


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        self.h, self.g = num_heads, num_heads // num_kv_heads
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, d_model // self.g, bias=False)
        self.w_v = nn.Linear(d_model, d_model // self.g, bias=False)
        self.w_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, cache=None):
        B, T, D = x.shape
        d = D // self.h
        split = lambda t: t.reshape(B, T, -1, d).permute(0, 2, 1, 3)
        q, k, v = split(self.w_q(x)), split(self.w_k(x)), split(self.w_v(x))
        if cache is not None:
            k, v = cache.update(k, v)
        n = k.shape[-2]
        share = lambda t: t[:, :, None].expand(B, t.shape[1], self.g, n, d).reshape(B, self.h, n, d)
        k, v = share(k), share(v)
        future = torch.ones(T, n, dtype=torch.bool, device=x.device).triu(n - T + 1)
        scores = (q @ k.mT) * d ** -0.5
        weights = scores.masked_fill(future, -math.inf).softmax(-1)
        return self.w_o((weights @ v).permute(0, 2, 1, 3).reshape(B, T, D))
