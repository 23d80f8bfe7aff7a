# Returns the merged heads without the output projection w_o.
# expect: partial
# graded: GroupedQueryAttention
# locus: w_o|output projection
# %% cell: grouped_query_attention
class GroupedQueryAttention(nn.Module):
    """Causal self-attention with num_heads query heads sharing num_kv_heads key/value heads.

    x: (B, T, d_model), the next T tokens; cache: None or a KVCache; returns (B, T, d_model)
    """

    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.head_dim = d_model // num_heads
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.w_v = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.w_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, cache=None):
        B, T, d_model = x.shape
        H, H_kv, d = self.num_heads, self.num_kv_heads, self.head_dim
        q = self.w_q(x).view(B, T, H, d).transpose(1, 2)  # (B, H, T, d)
        k = self.w_k(x).view(B, T, H_kv, d).transpose(1, 2)  # (B, H_kv, T, d)
        v = self.w_v(x).view(B, T, H_kv, d).transpose(1, 2)  # (B, H_kv, T, d)
        start = 0 if cache is None else len(cache)  # position of the first new token
        if cache is not None:
            k, v = cache.update(k, v)  # (B, H_kv, n, d): every position so far, the new ones last
        group = H // H_kv
        k = torch.repeat_interleave(k, group, dim=1)  # (B, H, n, d): each kv head serves
        v = torch.repeat_interleave(v, group, dim=1)  # `group` query heads in a row
        scores = q @ k.transpose(-2, -1) / math.sqrt(d)  # (B, H, T, n)
        rows = torch.arange(start, start + T, device=x.device)[:, None]  # the queries' positions
        cols = torch.arange(k.shape[-2], device=x.device)[None, :]  # the keys' positions
        scores = scores.masked_fill(cols > rows, float("-inf"))  # causal: no key after the query
        out = torch.softmax(scores, dim=-1) @ v  # (B, H, T, d)
        return out.transpose(1, 2).reshape(B, T, d_model)
