# A correct solution with explicit Python loops over the batch, the queries and the heads, that
# prints while it works, computes in float64 inside and casts back, and creates the score vector
# v for both kinds of score (unused for "dot": an extra parameter the test's weights do not
# need is allowed).
# expect: full
# %% cell: additive_attention
class AdditiveAttention(nn.Module):
    def __init__(self, query_size, key_size, hidden_size):
        super().__init__()
        self.w_q = nn.Linear(query_size, hidden_size, bias=False)
        self.w_k = nn.Linear(key_size, hidden_size, bias=False)
        self.v = nn.Linear(hidden_size, 1, bias=False)

    def forward(self, query, key, value, key_padding_mask=None):
        print("additive attention on", tuple(query.shape), tuple(key.shape))
        B, L, S = query.shape[0], query.shape[1], key.shape[1]
        qp, kp = self.w_q(query).double(), self.w_k(key).double()
        v = self.v.weight[0].double()
        weights = torch.zeros(B, L, S, dtype=torch.float64, device=query.device)
        for b in range(B):
            for i in range(L):
                row = torch.stack([v @ torch.tanh(qp[b, i] + kp[b, j]) for j in range(S)])
                if key_padding_mask is not None:
                    row = row.masked_fill(key_padding_mask[b], float("-inf"))
                weights[b, i] = torch.exp(row - row.max()) / torch.exp(row - row.max()).sum()
        output = weights @ value.double()
        return output.to(query.dtype), weights.to(query.dtype)
# %% cell: lstm_attention_pooling
class LSTMAttentionPooling(nn.Module):
    def __init__(self, hidden_size, num_heads=1, score="dot"):
        super().__init__()
        self.heads, self.score = num_heads, score
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(hidden_size, hidden_size, bias=False) for _ in range(4))
        self.v = nn.Parameter(torch.randn(num_heads, hidden_size // num_heads))

    def forward(self, outputs, h_n, key_padding_mask=None):
        B, D, E = outputs.shape
        d = E // self.heads
        q, k, val = self.w_q(h_n[-1]), self.w_k(outputs), self.w_v(outputs)
        pooled, all_weights = [], []
        for h in range(self.heads):
            part = slice(h * d, (h + 1) * d)
            if self.score == "dot":
                e = torch.einsum("bc,btc->bt", q[:, part], k[:, :, part]) / d ** 0.5
            else:
                e = torch.tanh(q[:, None, part] + k[:, :, part]) @ self.v[h]
            if key_padding_mask is not None:
                e = e.masked_fill(key_padding_mask, float("-inf"))
            a = torch.softmax(e, dim=-1)  # (B, D)
            all_weights.append(a)
            pooled.append(torch.einsum("bt,btc->bc", a, val[:, :, part]))
        print(f"pooled {self.heads} head(s)")
        return self.w_o(torch.cat(pooled, dim=-1)), torch.stack(all_weights, dim=1)
