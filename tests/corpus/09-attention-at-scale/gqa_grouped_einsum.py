# Correct: no repeated heads at all; the queries are grouped as (B, kv heads, group, T, d) and meet
# their shared key/value head in one einsum. The cache preallocates nothing and tracks a length.
# expect: full
# %% cell: grouped_query_attention
class KVCache:
    def __init__(self):
        self.keys = self.values = None
        self.length = 0

    def __len__(self):
        return self.length

    def update(self, k, v):
        if self.keys is None:
            self.keys, self.values = k, v
        else:
            self.keys = torch.cat((self.keys, k), dim=2)
            self.values = torch.cat((self.values, v), dim=2)
        self.length = self.keys.size(2)
        return self.keys, self.values


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        head_dim = d_model // num_heads
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, num_kv_heads * head_dim, bias=False)
        self.w_v = nn.Linear(d_model, num_kv_heads * head_dim, bias=False)
        self.w_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, cache=None):
        B, T, D = x.shape
        G, d = self.num_kv_heads, D // self.num_heads
        past = len(cache) if cache is not None else 0
        q = self.w_q(x).view(B, T, G, self.num_heads // G, d).permute(0, 2, 3, 1, 4)  # (B, G, g, T, d)
        k = self.w_k(x).view(B, T, G, d).transpose(1, 2)
        v = self.w_v(x).view(B, T, G, d).transpose(1, 2)
        if cache is not None:
            k, v = cache.update(k, v)
        scores = torch.einsum("bgqtd,bgsd->bgqts", q, k) / math.sqrt(d)  # (B, G, g, T, n)
        position = past + torch.arange(T, device=x.device)
        visible = torch.arange(k.shape[2], device=x.device)[None, :] <= position[:, None]
        weights = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
        out = torch.einsum("bgqts,bgsd->bgqtd", weights, v)  # (B, G, g, T, d)
        return self.w_o(out.permute(0, 3, 1, 2, 4).reshape(B, T, D))
