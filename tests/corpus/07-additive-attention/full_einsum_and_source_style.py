# A correct solution in another style: einsum for the additive scores and a -1e9 fill (which
# still gives weights of exactly 0 in float32 and float64); the pooling follows the source
# text's code: the additive hidden layer is one matrix applied to the concatenation [O_t; H_D],
# the dot-product scores are a matmul with the query as a column, and the heads are a loop.
# expect: full
# %% cell: additive_attention
class AdditiveAttention(nn.Module):
    def __init__(self, query_size, key_size, hidden_size):
        super().__init__()
        self.w_q = nn.Linear(query_size, hidden_size, bias=False)
        self.w_k = nn.Linear(key_size, hidden_size, bias=False)
        self.v = nn.Linear(hidden_size, 1, bias=False)

    def forward(self, query, key, value, key_padding_mask=None):
        q, k = self.w_q(query), self.w_k(key)
        scores = torch.einsum("blsh,h->bls", torch.tanh(q[:, :, None] + k[:, None]), self.v.weight[0])
        if key_padding_mask is not None:
            scores = torch.where(key_padding_mask[:, None, :], torch.full_like(scores, -1e9), scores)
        weights = F.softmax(scores, dim=2)
        return torch.einsum("bls,bsv->blv", weights, value), weights
# %% cell: lstm_attention_pooling
class LSTMAttentionPooling(nn.Module):
    def __init__(self, hidden_size, num_heads=1, score="dot"):
        super().__init__()
        self.n, self.score = num_heads, score
        self.w_q = nn.Linear(hidden_size, hidden_size, bias=False)
        self.w_k = nn.Linear(hidden_size, hidden_size, bias=False)
        self.w_v = nn.Linear(hidden_size, hidden_size, bias=False)
        self.w_o = nn.Linear(hidden_size, hidden_size, bias=False)
        if score == "additive":
            self.v = nn.Parameter(torch.zeros(num_heads, hidden_size // num_heads))

    def forward(self, outputs, h_n, key_padding_mask=None):
        batch_size, doc_size, dim = outputs.shape
        dk = dim // self.n
        hidden = h_n[-1]
        if self.score == "dot":
            q_n = self.w_q(hidden).reshape(batch_size, self.n, dk).unsqueeze(-1)  # (B, n, dk, 1)
            key = self.w_k(outputs).reshape(batch_size, doc_size, self.n, dk).transpose(1, 2)
            weights = torch.matmul(key, q_n).squeeze(-1) / math.sqrt(dk)  # (B, n, D)
        else:
            h_i = torch.cat((outputs, hidden[:, None, :].expand(-1, doc_size, -1)), dim=-1)  # [O_t; H_D]
            w = torch.cat((self.w_k.weight, self.w_q.weight), dim=1)  # one matrix for the concatenation
            query = torch.tanh(h_i @ w.T).reshape(batch_size, doc_size, self.n, dk).transpose(1, 2)
            weights = torch.stack([query[:, h] @ self.v[h] for h in range(self.n)], dim=1)
        if key_padding_mask is not None:
            weights = weights.masked_fill(key_padding_mask.unsqueeze(1), -1e9)
        soft = F.softmax(weights, dim=2)
        value = self.w_v(outputs).reshape(batch_size, doc_size, self.n, dk)
        out = [torch.bmm(soft[:, h:h + 1], value[:, :, h]).squeeze(1) for h in range(self.n)]
        return self.w_o(torch.cat(out, dim=-1)), soft
