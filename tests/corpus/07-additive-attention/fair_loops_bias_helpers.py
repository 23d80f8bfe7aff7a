# Correct: AdditiveAttention scores each query in a Python loop (a list comprehension) and adds
# a -inf bias at the padding; LSTMAttentionPooling picks its score function once in __init__ (a
# bound method kept on the module), splits heads with a helper of its own and loops over them.
# A scratch cell prints the weights of a small example. Full marks.
# expect: full
# %% cell: additive_attention
def padding_bias(key_padding_mask, like):
    """0 at the tokens, -inf at the padding: (B, 1, S), added to the scores."""
    bias = torch.zeros(key_padding_mask.shape, dtype=like.dtype, device=like.device)
    return bias.masked_fill(key_padding_mask, float("-inf")).unsqueeze(1)


class AdditiveAttention(nn.Module):
    def __init__(self, query_size, key_size, hidden_size):
        super().__init__()
        self.w_q = nn.Linear(query_size, hidden_size, bias=False)
        self.w_k = nn.Linear(key_size, hidden_size, bias=False)
        self.v = nn.Linear(hidden_size, 1, bias=False)

    def forward(self, query, key, value, key_padding_mask=None):
        keys = self.w_k(key)  # (B, S, h)
        rows = [self.v(torch.tanh(keys + q_i.unsqueeze(1))).squeeze(-1) for q_i in self.w_q(query).unbind(1)]
        scores = torch.stack(rows, dim=1)  # (B, L, S)
        if key_padding_mask is not None:
            scores = scores + padding_bias(key_padding_mask, scores)
        weights = scores.softmax(dim=-1)
        return torch.bmm(weights, value), weights
# %% cell: lstm_attention_pooling
def heads_of(x, num_heads):
    """(..., E) -> (..., H, E/H): head h holds features h·d .. (h+1)·d - 1."""
    return x.view(*x.shape[:-1], num_heads, x.shape[-1] // num_heads)


class LSTMAttentionPooling(nn.Module):
    def __init__(self, hidden_size, num_heads=1, score="dot"):
        super().__init__()
        if score not in ("dot", "additive"):
            raise ValueError(score)
        self.num_heads = num_heads
        self.w_q = nn.Linear(hidden_size, hidden_size, bias=False)
        self.w_k = nn.Linear(hidden_size, hidden_size, bias=False)
        self.w_v = nn.Linear(hidden_size, hidden_size, bias=False)
        self.w_o = nn.Linear(hidden_size, hidden_size, bias=False)
        if score == "additive":
            self.v = nn.Parameter(torch.randn(num_heads, hidden_size // num_heads) * 0.1)
            self.score_fn = self.additive_scores
        else:
            self.score_fn = self.dot_scores

    def dot_scores(self, q_h, k_h, h):
        return (k_h @ q_h.unsqueeze(-1)).squeeze(-1) / math.sqrt(q_h.shape[-1])  # (B, D)

    def additive_scores(self, q_h, k_h, h):
        return torch.tanh(k_h + q_h.unsqueeze(1)) @ self.v[h]  # (B, D)

    def forward(self, outputs, h_n, key_padding_mask=None):
        q = heads_of(self.w_q(h_n[-1]), self.num_heads)  # (B, H, d)
        k = heads_of(self.w_k(outputs), self.num_heads)  # (B, D, H, d)
        v = heads_of(self.w_v(outputs), self.num_heads)
        all_weights, pooled = [], []
        for h in range(self.num_heads):
            scores = self.score_fn(q[:, h], k[:, :, h], h)  # (B, D)
            if key_padding_mask is not None:
                scores = scores.masked_fill(key_padding_mask, float("-inf"))
            w = torch.softmax(scores, dim=-1)
            all_weights.append(w)
            pooled.append((w.unsqueeze(-1) * v[:, :, h]).sum(dim=1))  # (B, d)
        return self.w_o(torch.cat(pooled, dim=-1)), torch.stack(all_weights, dim=1)
# %% new cell after: test_pooling_dot
pool = LSTMAttentionPooling(8, num_heads=2)
outs, h = torch.randn(3, 5, 8), torch.randn(1, 3, 8)
pooled, weights = pool(outs, h)
print(pooled.shape, weights.sum(-1))
