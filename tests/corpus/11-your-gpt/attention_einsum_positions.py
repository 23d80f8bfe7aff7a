# Correct: einsum for the scores and the sum, and the causal mask written from the positions of the
# queries and the keys (key position > query position is hidden), which is bottom-right by construction.
# expect: full
# %% cell: gpt
class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, positions="rope"):
        super().__init__()
        self.h, self.positions = num_heads, positions
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, d_model, bias=False)
        self.w_v = nn.Linear(d_model, d_model, bias=False)
        self.w_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, cache=None):
        B, T, d = x.shape
        hd = d // self.h
        past = len(cache) if cache is not None else 0
        q = self.w_q(x).reshape(B, T, self.h, hd).permute(0, 2, 1, 3)
        k = self.w_k(x).reshape(B, T, self.h, hd).permute(0, 2, 1, 3)
        v = self.w_v(x).reshape(B, T, self.h, hd).permute(0, 2, 1, 3)
        q_pos = torch.arange(past, past + T, device=x.device)
        if self.positions == "rope":
            q, k = apply_rope(q, q_pos), apply_rope(k, q_pos)
        if cache is not None:
            k, v = cache.update(k, v)
        k_pos = torch.arange(k.shape[2], device=x.device)
        s = torch.einsum("bhtd,bhsd->bhts", q, k) * hd ** -0.5
        if self.positions == "alibi":
            s = s + alibi_bias(self.h, T, k.shape[2]).to(device=s.device, dtype=s.dtype)
        s = s.masked_fill(k_pos[None, :] > q_pos[:, None], float("-inf"))
        out = torch.einsum("bhts,bhsd->bhtd", s.softmax(-1), v)
        return self.w_o(out.permute(0, 2, 1, 3).reshape(B, T, d))
