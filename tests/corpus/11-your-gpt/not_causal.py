# No causal mask at all: every position sees the whole sequence, the tokens it predicts included.
# expect: partial
# hint: not causal
# %% cell: gpt
class CausalSelfAttention(nn.Module):
    """Causal multi-head self-attention with RoPE or ALiBi positions and an optional KV cache."""

    def __init__(self, d_model, num_heads, positions="rope"):
        super().__init__()
        self.num_heads, self.head_dim, self.positions = num_heads, d_model // num_heads, positions
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, d_model, bias=False)
        self.w_v = nn.Linear(d_model, d_model, bias=False)
        self.w_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, cache=None):
        B, T, d = x.shape
        start = 0 if cache is None else len(cache)  # before the update: where these tokens begin
        heads = lambda t: t.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, T, hd)
        q, k, v = heads(self.w_q(x)), heads(self.w_k(x)), heads(self.w_v(x))
        if self.positions == "rope":
            where = torch.arange(start, start + T, device=x.device)
            q, k = apply_rope(q, where), apply_rope(k, where)
        if cache is not None:
            k, v = cache.update(k, v)  # (B, H, S, hd): every position so far
        S = k.size(-2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, T, S)
        if self.positions == "alibi":
            scores = scores + alibi_bias(self.num_heads, T, S).to(scores)
        out = scores.softmax(dim=-1) @ v  # (B, H, T, hd)
        return self.w_o(out.transpose(1, 2).reshape(B, T, d))
